"""A lost profile batch is noticed as fast as a lost trial message (issue 18, item 13), on a farm of
its own: a job whose profile requests were made but whose batch message never reached a worker (as
when the broker is flushed just after the coordinator sent it) gets its profiles within the trial
re-dispatch time, not after profile_redispatch_after_seconds (300 s by default, left so here)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import func, select, update

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import Job, Trial, TrialProfile
from kernelfarm.core.store import profiles as profile_store
from kernelfarm.core.store.workers import live_workers
from kernelfarm.testing.chaos_farm import ChaosFarm
from kernelfarm.testing.clocks import FAST_TIMINGS
from tests.conftest import wait_for
from tests.reliability.conftest import make_job, valid_configs

REDISPATCH = float(FAST_TIMINGS["KERNELFARM_REDISPATCH_AFTER_SECONDS"])


@pytest.fixture(scope="module")
def farm(own_farm: ChaosFarm) -> Iterator[ChaosFarm]:
    own_farm.start_coordinator()
    own_farm.start_worker()
    wait_for(lambda: _live(own_farm), 60, "a live worker")
    yield own_farm


def _live(farm: ChaosFarm) -> bool:
    with session_scope(farm.database_url) as session:
        return bool(live_workers(session, 4.0))


def test_a_lost_profile_batch_is_sent_again_as_fast_as_a_lost_trial(farm: ChaosFarm) -> None:
    configs = valid_configs(3)
    job_id, trial_ids = make_job(farm.database_url, configs, budget=3)
    with session_scope(farm.database_url) as session:
        # The search is over: every trial measured, profiles requested, and the batch message lost.
        session.execute(
            update(Trial).where(Trial.id.in_(trial_ids)).values(
                state="complete", verified=True, time_ms=1.0, finished_at=func.now(), started_at=func.now())
        )  # fmt: skip
        session.execute(update(Job).where(Job.id == job_id).values(profile="all"))
        assert profile_store.request_profiles(session, job_id, trial_ids) == sorted(trial_ids)
    started = time.monotonic()

    def answered() -> bool:
        with session_scope(farm.database_url) as session:
            unanswered = session.execute(
                select(func.count()).where(TrialProfile.job_id == job_id, TrialProfile.profiled_at.is_(None))
            ).scalar_one()
        return unanswered == 0

    wait_for(answered, REDISPATCH + 30, "the lost profile batch to be sent again and answered")
    elapsed = time.monotonic() - started
    assert elapsed < REDISPATCH + 15, f"answered after {elapsed:.1f} s"
    with session_scope(farm.database_url) as session:
        rows = session.execute(select(TrialProfile).where(TrialProfile.job_id == job_id)).scalars().all()
        assert rows and all(r.claimed_at is not None and r.worker_name for r in rows)
    wait_for(lambda: _job_state(farm, job_id) == "complete", 30, "the job to complete")


def _job_state(farm: ChaosFarm, job_id: object) -> str:
    with session_scope(farm.database_url) as session:
        return str(session.execute(select(Job.state).where(Job.id == job_id)).scalar_one())
