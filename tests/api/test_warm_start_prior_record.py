"""Issue 17: a warm job's status says which prior it used. The status message says it only while the
job runs (a finished job's says how it ended), so the job keeps it (``warm_start_prior``), and the
API returns it. The coordinator steps the job here in-process, as tests/tuner/test_stored_strategy_options.py
does; the API is a real process over HTTP."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import delete

from kernelfarm.core.db import session_scope
from kernelfarm.core.gpu import queue_for
from kernelfarm.core.models import GpuWorker, Job, Trial
from kernelfarm.core.settings import get_settings
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store import trials as trial_store
from kernelfarm.core.store import workers as worker_store
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.tuner import coordinator
from tests.api.conftest import client_for
from tests.conftest import Farm, make_token, measure_trials, store_job

KERNEL = "convolution_kernel"


@pytest.fixture
def models(database_url: str) -> Iterator[tuple[str, str]]:
    """(source, target): GPU models of this test alone; the target has a live worker row (a step
    without one only waits)."""
    run = secrets.token_hex(4)
    source, target = f"test-prior-source-{run}", f"test-prior-target-{run}"
    identity = worker_store.WorkerIdentity(name=f"{target}@test", hostname="test", backend="replay",
                                           gpu_model=target, gpu_name=target, queue=queue_for(target))  # fmt: skip
    with session_scope(database_url) as session:
        worker_store.register_worker(session, identity)
    yield source, target
    with session_scope(database_url) as session:
        jobs = session.query(Job.id).filter(Job.gpu_model.in_([source, target])).scalar_subquery()
        session.execute(delete(Trial).where(Trial.job_id.in_(jobs)))
        session.execute(delete(Job).where(Job.gpu_model.in_([source, target])))
        session.execute(delete(GpuWorker).where(GpuWorker.gpu_model == target))


def step(job_id: uuid.UUID) -> tuple[Job, list[int]]:
    sent: list[Any] = []
    coordinator.advance(job_id, get_settings(), lambda trial_id, _: sent.append(trial_id), lambda *a: None)
    with session_scope() as session:
        return job_store.get_job(session, job_id), sent


def test_a_warm_job_keeps_the_prior_it_used_once_done(
    database_url: str, models: tuple[str, str], api_only: Farm
) -> None:
    source, target = models
    spec = get_kernel(KERNEL)
    # A problem of this test alone: a prior is every other GPU model's trials of the kernel and problem
    # in the database, and the test session's other modules tune the default problem.
    problem = {"size_x": 4096 + 16 * (1 + secrets.randbelow(1 << 20)), "size_y": 4096}
    same = {"problem": problem, "problem_key": spec.problem_key(problem)}
    configs = spec.space.valid_configs(problem)[:6]
    with session_scope(database_url) as session:
        done = store_job(session, KERNEL, source, **same)
        ids = [t.id for t in trial_store.add_trials(session, done, [(spec.space.key(c), c) for c in configs])]
        warm = store_job(session, KERNEL, target, strategy="bayes", warm_start=True, budget_trials=3, **same)
        cold = store_job(session, KERNEL, target, strategy="bayes", warm_start=False, budget_trials=3, **same)
    measure_trials(database_url, ids, 2.0)

    job, proposed = step(warm.id)
    # the gate judges the prior on the job's own first measurements: held back until then
    assert job.warm_start_prior == {"trials": 6, "sources": [source], "state": "held_back"}
    assert f"warm start: 6 trials from {source} (held back" in job.status_message
    for _ in range(3):  # until its 3 trials are measured and it ends
        measure_trials(database_url, proposed)
        job, proposed = step(warm.id)
    assert job.state == "complete" and "warm start" not in job.status_message  # the message moved on
    assert job.warm_start_prior == {"trials": 6, "sources": [source], "state": "held_back"}  # the job did not

    job, proposed = step(cold.id)
    assert proposed and job.warm_start_prior is None  # warm start off: nothing used, nothing recorded

    with client_for(api_only, make_token(database_url, "read", name="prior-reader")) as client:
        shown = client.get(f"/v1/jobs/{warm.id}").json()
        assert shown["warm_start_prior"] == {"trials": 6, "sources": [source], "state": "held_back"}
        assert client.get(f"/v1/jobs/{cold.id}").json()["warm_start_prior"] is None
