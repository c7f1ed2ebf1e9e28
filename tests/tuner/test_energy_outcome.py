"""An energy job whose trials the meter gave up on (worker/measuring/energy.py): each such trial keeps
its time and says why it has no energy (``metrics["energy_missing"]``); it never becomes the job's
best under an energy objective, and the job still ends, saying why, when no trial has energy. On the
real schema; the coordinator's step is called in-process (no broker: nothing is left to dispatch)."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import delete

from kernelfarm.core.db import session_scope
from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.core.models import Job, Trial
from kernelfarm.core.settings import get_settings
from kernelfarm.core.states import JobState
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store import trials as trial_store
from kernelfarm.tuner import coordinator
from tests.conftest import store_job

GAVE_UP = "the meter gave up: no complete energy window in 4.01 s (the counter stepped 1 time(s))"


@pytest.fixture
def gpu_model(database_url: str) -> Iterator[str]:
    model = f"test-energy-{secrets.token_hex(4)}"  # no worker serves it: nothing else touches these jobs
    yield model
    with session_scope(database_url) as session:
        jobs = session.query(Job.id).filter(Job.gpu_model == model).scalar_subquery()
        session.execute(delete(Trial).where(Trial.job_id.in_(jobs)))
        session.execute(delete(Job).where(Job.gpu_model == model))


def energy_job(
    database_url: str,
    gpu_model: str,
    objective: str,
    results: list[tuple[float, dict[str, Any]]],
    verified: bool = True,
    budget: int | None = None,
) -> uuid.UUID:
    """A job of ``objective`` that spent ``budget`` trials (default: all of them) on ``results`` (time in ms,
    metrics), each ``verified`` or not."""
    with session_scope(database_url) as session:
        job = store_job(session, "matmul_fp32", gpu_model, objective=objective, budget_trials=budget or len(results))
        trials = trial_store.add_trials(session, job, [(f"k{i}", {"i": i}) for i in range(len(results))])
        job_id, ids = job.id, [t.id for t in trials]
    for trial_id, (time_ms, metrics) in zip(ids, results, strict=True):
        with session_scope(database_url) as session:
            claim = trial_store.claim(session, trial_id, "test-worker", None)
            assert claim is not None
        measured = Measurement(timing=TimingStats.from_times([time_ms]), verified=verified, metrics=metrics)
        with session_scope(database_url) as session:
            assert trial_store.record_result(session, trial_id, claim.attempt, measured)
    return job_id


def step(job_id: uuid.UUID) -> Job:
    sent: list[Any] = []
    coordinator.advance(job_id, get_settings(), lambda *a: sent.append(a), lambda *a: sent.append(a))
    assert sent == []  # the budget is spent: the step only finishes the job
    with session_scope() as session:
        return job_store.get_job(session, job_id)


@pytest.mark.parametrize("objective", ["energy", "time+energy"])
def test_a_trial_without_energy_keeps_its_time_but_never_wins_an_energy_job(
    database_url: str, gpu_model: str, objective: str
) -> None:
    job_id = energy_job(database_url, gpu_model, objective, [
        (0.5, {"energy_missing": GAVE_UP, "energy_s": 4.01}),  # the fastest, but its energy is unknown
        (2.0, {"energy_mj": 3.0}),
        (1.0, {"energy_mj": 9.0}),
    ])  # fmt: skip
    job = step(job_id)
    winner = {"energy": 3.0, "time+energy": 9.0}[objective]  # least energy / the front's fastest
    assert job.state == JobState.COMPLETE.value, job.status_message
    assert f"best {winner:.4g} mJ" in job.status_message
    assert "1 without an energy reading" in job.status_message and GAVE_UP in job.status_message
    with session_scope(database_url) as session:
        best = job_store.job_progress(session, job_id, objective).best
        assert best is not None and best.metrics["energy_mj"] == winner
        # the time objective still sees the trial's (real) time
        fastest = job_store.best_trial_of_job(session, job_id, "time")
        assert fastest is not None and fastest.time_ms == 0.5 and fastest.metrics["energy_missing"] == GAVE_UP


def test_an_energy_job_with_no_energy_at_all_ends_failed_and_says_why(database_url: str, gpu_model: str) -> None:
    job_id = energy_job(database_url, gpu_model, "energy", [(1.0, {"energy_missing": GAVE_UP})] * 2)
    job = step(job_id)
    assert job.state == JobState.FAILED.value
    assert "2 complete" in job.status_message and "no energy measured" in job.status_message
    assert GAVE_UP in job.status_message


@pytest.mark.parametrize("objective", ["energy", "time+energy"])
def test_an_energy_job_with_no_verified_config_says_no_config_succeeded(
    database_url: str, gpu_model: str, objective: str
) -> None:
    # Every trial completed and has its energy, but none gave the right answer: energy is not what is missing.
    job_id = energy_job(database_url, gpu_model, objective, [(1.0, {"energy_mj": 3.0})] * 2, verified=False)
    job = step(job_id)
    assert job.state == JobState.FAILED.value
    assert "2 complete" in job.status_message and "no config succeeded" in job.status_message
    assert "energy" not in job.status_message


def test_an_energy_job_whose_first_trials_have_no_energy_stops_early_and_says_why(
    database_url: str, gpu_model: str
) -> None:
    # 100 trials of budget; after the first ENERGY_GIVE_UP_AFTER complete ones without an energy reading the
    # job fails instead of spending the other 92 (no worker serves this GPU model: it would otherwise wait).
    results = [(1.0, {"energy_missing": "no energy meter on this GPU"})] * coordinator.ENERGY_GIVE_UP_AFTER
    job_id = energy_job(database_url, gpu_model, "energy", results, budget=100)
    job = step(job_id)
    assert job.state == JobState.FAILED.value, job.status_message
    assert f"no energy reading in {coordinator.ENERGY_GIVE_UP_AFTER} complete trials" in job.status_message
    assert "no energy meter on this GPU" in job.status_message


def test_an_energy_job_with_one_reading_keeps_searching(database_url: str, gpu_model: str) -> None:
    results = [(1.0, {"energy_missing": "no energy meter on this GPU"})] * coordinator.ENERGY_GIVE_UP_AFTER
    job_id = energy_job(database_url, gpu_model, "energy", [*results, (2.0, {"energy_mj": 5.0})], budget=100)
    sent: list[Any] = []
    coordinator.advance(job_id, get_settings(), lambda *a: sent.append(a), lambda *a: sent.append(a))
    with session_scope() as session:
        job = job_store.get_job(session, job_id)
    assert not JobState(job.state).finished, job.status_message  # waits for a worker, budget left
