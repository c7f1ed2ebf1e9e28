"""The trial state machine on the real schema: leases, attempts, conditional writes, the reaper."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import func, update

from kernelfarm.core.db import session_scope
from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.core.models import Job, Trial
from kernelfarm.core.states import FailureKind, TrialState
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store import trials as trial_store
from tests.conftest import store_job

OK = Measurement(timing=TimingStats.from_times([1.0, 2.0, 3.0]), verified=True)


@pytest.fixture
def job_id(database_url: str) -> uuid.UUID:
    with session_scope(database_url) as session:
        job = store_job(session, "cn_pnpoly", "nvidia-geforce-rtx-3090")
        trial_store.add_trials(session, job, [("0,32,1,0", {"between_method": 0, "block_size_x": 32,
                                                            "tile_size": 1, "use_method": 0})])  # fmt: skip
        return job.id


def trial_of(database_url: str, job_id: uuid.UUID) -> Trial:
    with session_scope(database_url) as session:
        return trial_store.history(session, job_id)[0]


def test_claim_once_and_write_once(database_url: str, job_id: uuid.UUID) -> None:
    trial = trial_of(database_url, job_id)
    with session_scope(database_url) as session:
        claim = trial_store.claim(session, trial.id, "w1", None)
    assert claim is not None and claim.attempt == 1
    with session_scope(database_url) as session:
        assert trial_store.claim(session, trial.id, "w2", None) is None  # a duplicate delivery
    with session_scope(database_url) as session:
        assert trial_store.record_result(session, trial.id, 1, OK)
    with session_scope(database_url) as session:
        assert not trial_store.record_result(session, trial.id, 1, OK)  # finished trials never change
        failed = Measurement.failed(FailureKind.CRASH, "late")
        assert not trial_store.record_result(session, trial.id, 1, failed)
    final = trial_of(database_url, job_id)
    assert final.state == TrialState.COMPLETE and final.time_ms == 2.0 and final.times_ms == [1.0, 2.0, 3.0]


def test_reaper_requeues_then_fails_after_the_retry_cap(database_url: str, job_id: uuid.UUID) -> None:
    trial = trial_of(database_url, job_id)
    for attempt in (1, 2):
        with session_scope(database_url) as session:
            claim = trial_store.claim(session, trial.id, f"w{attempt}", None)
            assert claim is not None and claim.attempt == attempt
            # the worker died: its heartbeat is old (moved back in time instead of waiting)
            session.execute(
                update(Trial).where(Trial.id == trial.id).values(heartbeat_at=func.now() - timedelta(hours=1))
            )
        with session_scope(database_url) as session:
            reaped = trial_store.reap_expired_leases(session, lease_seconds=5, max_attempts=2)
        if attempt == 1:
            assert [r[0] for r in reaped.requeued] == [trial.id]
            with session_scope(database_url) as session:  # the stale attempt cannot write any more
                assert not trial_store.record_result(session, trial.id, 1, OK)
        else:
            assert reaped.failed == [trial.id]
    final = trial_of(database_url, job_id)
    assert final.state == TrialState.FAILED and final.failure_kind == FailureKind.CRASH
    assert "not retried again" in (final.failure_message or "")


def test_heartbeat_keeps_a_lease_and_reports_its_loss(database_url: str, job_id: uuid.UUID) -> None:
    trial = trial_of(database_url, job_id)
    with session_scope(database_url) as session:
        claim = trial_store.claim(session, trial.id, "w1", None)
    assert claim is not None
    time.sleep(0.05)
    with session_scope(database_url) as session:
        assert trial_store.heartbeat(session, trial.id, claim.attempt)
        assert not trial_store.heartbeat(session, trial.id, claim.attempt + 1)
    with session_scope(database_url) as session:
        job_store.cancel_job(session, job_id)
    with session_scope(database_url) as session:
        assert not trial_store.heartbeat(session, trial.id, claim.attempt)  # cancelled: lease gone
        assert not trial_store.record_result(session, trial.id, claim.attempt, OK)


def test_a_lost_worker_is_charged_to_the_trial_it_was_measuring_not_to_the_one_queued_behind(
    database_url: str, job_id: uuid.UUID
) -> None:
    """A worker holds the trial it measures and one claimed behind it (worker/runner.py). When it
    dies, only the first counts toward the retry cap: a config that only ever waited behind another
    on three lost workers is requeued again, not failed as "crash" (it was, with the attempts cap)."""
    with session_scope(database_url) as session:
        job = session.get_one(Job, job_id)
        trial_store.add_trials(session, job, [("1,32,1,0", {"between_method": 1, "block_size_x": 32,
                                                            "tile_size": 1, "use_method": 0})])  # fmt: skip
    first, behind = trial_store_history_ids(database_url, job_id)
    for round_ in (1, 2, 3):
        worker = f"lost{round_}"
        for trial_id in (first, behind):  # claimed in this order: the first is measured
            with session_scope(database_url) as session:
                claim = trial_store.claim(session, trial_id, worker, None)
                assert claim is not None and claim.attempt == round_
        with session_scope(database_url) as session:
            assert trial_store.expire_leases_of(session, [worker]) == 2  # the worker is gone
        with session_scope(database_url) as session:
            reaped = trial_store.reap_expired_leases(session, lease_seconds=3600, max_attempts=3)
        if round_ < 3:
            assert sorted(r[0] for r in reaped.requeued) == [first, behind]
        else:
            assert reaped.failed == [first] and [r[0] for r in reaped.requeued] == [behind]
    with session_scope(database_url) as session:
        rows = {t.id: t for t in trial_store.history(session, job_id)}
    assert rows[first].state == TrialState.FAILED and rows[first].losses == 3
    assert "worker lost 3 times" in (rows[first].failure_message or "")
    assert rows[behind].state == TrialState.QUEUED and rows[behind].losses == 0 and rows[behind].attempt == 3


def trial_store_history_ids(database_url: str, job_id: uuid.UUID) -> list[int]:
    with session_scope(database_url) as session:
        return [t.id for t in trial_store.history(session, job_id)]
