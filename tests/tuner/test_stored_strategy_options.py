"""A job stored with options its strategy refuses ends at its next step and says why. The API refuses
such options now (tests/api/test_input_hardening.py); a job stored before it did, or whose option a
later version removed, made the coordinator raise at every step: it stayed queued for good."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import delete

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import GpuWorker, Job
from kernelfarm.core.settings import get_settings
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store import trials as trial_store
from kernelfarm.tuner import coordinator
from tests.conftest import measure_trials, served_gpu_model, store_job

REFUSED = "cannot build its strategy: unknown options for strategy 'bayes': ['removed_option']"


@pytest.fixture
def gpu_model(database_url: str) -> Iterator[str]:
    with served_gpu_model(database_url, "test-options") as model:
        yield model


def job_with_results(database_url: str, gpu_model: str, times_ms: list[float]) -> uuid.UUID:
    """A bayes job of 10 trials whose options name one its strategy does not know, and ``times_ms``
    measured already."""
    with session_scope(database_url) as session:
        job = store_job(session, "convolution_kernel", gpu_model, strategy="bayes",
                        strategy_options={"removed_option": 1})  # fmt: skip
        trials = trial_store.add_trials(session, job, [(f"k{i}", {"i": i}) for i in range(len(times_ms))])
        job_id, ids = job.id, [t.id for t in trials]
    for trial_id, time_ms in zip(ids, times_ms, strict=True):
        measure_trials(database_url, [trial_id], time_ms)
    return job_id


def step(job_id: uuid.UUID) -> Job:
    sent: list[Any] = []
    coordinator.advance(job_id, get_settings(), lambda *a: sent.append(a), lambda *a: sent.append(a))
    assert sent == []  # nothing proposed, nothing to profile
    with session_scope() as session:
        return job_store.get_job(session, job_id)


def test_a_new_job_whose_options_its_strategy_refuses_fails_saying_why(database_url: str, gpu_model: str) -> None:
    job = step(job_with_results(database_url, gpu_model, []))
    assert job.state == "failed"
    assert f"failed ({REFUSED}" in (job.status_message or "")


def test_a_job_with_results_ends_complete_with_them(database_url: str, gpu_model: str) -> None:
    job_id = job_with_results(database_url, gpu_model, [2.0, 1.5])
    job = step(job_id)
    assert job.state == "complete"
    assert f"complete ({REFUSED}" in (job.status_message or "") and "2 complete, 0 failed; best 1.5000 ms (k1)" in (
        job.status_message or ""
    )
    assert step(job_id).status_message == job.status_message  # finished: a later step changes nothing


def test_without_a_live_worker_it_fails_at_once_not_for_want_of_one(database_url: str, gpu_model: str) -> None:
    """The options are checked before the coordinator waits for a worker: such a job used to wait
    no_worker_timeout_seconds, then fail saying no worker came, which was not why it could not run."""
    job_id = job_with_results(database_url, gpu_model, [])
    with session_scope(database_url) as session:
        session.execute(delete(GpuWorker).where(GpuWorker.gpu_model == gpu_model))
    job = step(job_id)
    assert job.state == "failed"
    assert f"failed ({REFUSED}" in (job.status_message or "")
