"""The top-k profiles of a job, on the real schema: requested once nothing of the job is left to
run, and split across the model's live workers."""

from __future__ import annotations

import uuid

import pytest

from kernelfarm.core.db import session_scope
from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.core.models import Job
from kernelfarm.core.store import trials as trial_store
from kernelfarm.tuner.profiling import plan_profiles
from tests.reliability.conftest import make_job, valid_configs


def top_k_job(database_url: str, n: int, k: int, offset: int) -> tuple[uuid.UUID, list[int]]:
    job_id, ids = make_job(database_url, valid_configs(n, offset=offset), parallelism=n)
    with session_scope(database_url) as session:
        job = session.get_one(Job, job_id)
        job.profile, job.profile_top_k = "top_k", k
    return job_id, ids


def finish(database_url: str, trial_id: int, time_ms: float) -> None:
    with session_scope(database_url) as session:
        claim = trial_store.claim(session, trial_id, "w-plan", None)
        assert claim is not None
        measurement = Measurement(timing=TimingStats.from_times([time_ms] * 3), verified=True)
        assert trial_store.record_result(session, trial_id, claim.attempt, measurement)


def plan(database_url: str, job_id: uuid.UUID, workers: int, search_done: bool = True) -> list[list[int]]:
    with session_scope(database_url) as session:
        job = session.get_one(Job, job_id)
        return plan_profiles(session, job, 8, search_done=search_done, workers=workers).batches


@pytest.mark.usefixtures("database_url")
def test_one_worker_profiles_the_top_k_at_the_end(database_url: str) -> None:
    job_id, ids = top_k_job(database_url, 4, k=3, offset=100)
    for trial_id, time_ms in zip(ids[:3], [3.0, 2.0, 1.0], strict=True):
        finish(database_url, trial_id, time_ms)
    assert plan(database_url, job_id, workers=1, search_done=False) == []  # not before the search is done
    finish(database_url, ids[3], 0.5)
    assert plan(database_url, job_id, workers=1) == [sorted([ids[1], ids[2], ids[3]])]


@pytest.mark.usefixtures("database_url")
def test_the_final_top_k_is_split_across_the_workers(database_url: str) -> None:
    job_id, ids = top_k_job(database_url, 5, k=5, offset=110)
    for trial_id, time_ms in zip(ids, [5.0, 4.0, 3.0, 2.0, 1.0], strict=True):
        finish(database_url, trial_id, time_ms)
    batches = plan(database_url, job_id, workers=2)
    assert sorted(len(b) for b in batches) == [2, 3]
    assert sorted(t for b in batches for t in b) == sorted(ids)
