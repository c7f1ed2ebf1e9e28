"""The trial state machine under concurrency, on the real schema: many claimers, late writers,
the reaper racing a worker, and database retries."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, update
from sqlalchemy.exc import OperationalError

from kernelfarm.core.db import session_scope
from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.core.models import Trial
from kernelfarm.core.store import trials as trial_store
from kernelfarm.worker.db_retry import with_db_retry
from tests.reliability.conftest import make_job, valid_configs

OK = Measurement(timing=TimingStats.from_times([1.0, 2.0, 3.0]), verified=True)


@pytest.fixture(autouse=True)
def cancel_leftovers(database_url: str) -> Iterator[None]:
    """These jobs live in the session's shared database: cancel them so no later module's
    coordinator re-dispatches their queued trials."""
    yield
    from sqlalchemy import select

    from kernelfarm.core.models import Job
    from kernelfarm.core.store.jobs import cancel_job

    with session_scope(database_url) as session:
        mine = select(Job.id).where(Job.owner == "reliability", Job.state == "running")
        for job_id in session.execute(mine).scalars():
            cancel_job(session, job_id)


def race(n: int, action: Callable[[int], Any]) -> list[Any]:
    """``action(i)`` for each i in n threads started together: their results, in order."""
    results: list[Any] = [None] * n
    barrier = threading.Barrier(n)

    def run(i: int) -> None:
        barrier.wait()
        results[i] = action(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def claim(database_url: str, trial_id: int, worker: str) -> trial_store.Claim | None:
    with session_scope(database_url) as session:
        return trial_store.claim(session, trial_id, worker, None)


def record(database_url: str, trial_id: int, attempt: int) -> bool:
    with session_scope(database_url) as session:
        return trial_store.record_result(session, trial_id, attempt, OK)


def expire(database_url: str, trial_id: int) -> None:
    with session_scope(database_url) as session:
        session.execute(update(Trial).where(Trial.id == trial_id)
                        .values(heartbeat_at=func.now() - timedelta(hours=1)))  # fmt: skip


def test_eight_concurrent_deliveries_claim_once_and_write_once(database_url: str) -> None:
    _, (trial_id,) = make_job(database_url, valid_configs(1))
    claims = race(8, lambda i: claim(database_url, trial_id, f"w{i}"))
    won = [c for c in claims if c is not None]
    assert len(won) == 1 and won[0].attempt == 1
    writes = race(8, lambda i: record(database_url, trial_id, 1))
    assert writes.count(True) == 1


def test_reaper_and_late_writer_race_one_wins(database_url: str) -> None:
    job_id, trial_ids = make_job(database_url, valid_configs(20, offset=100))
    for trial_id in trial_ids:
        assert claim(database_url, trial_id, "slow") is not None
        expire(database_url, trial_id)

    def act(i: int) -> trial_store.Reaped | list[bool]:
        if i == 0:
            with session_scope(database_url) as session:
                return trial_store.reap_expired_leases(session, lease_seconds=5, max_attempts=3)
        return [record(database_url, t, 1) for t in trial_ids]

    reaped, written = race(2, act)
    # The reaper serves the whole database: trials that an earlier test of this database left claimed
    # are reaped with these once their leases are 5 s old (a fresh-clone run requeued 22, three of them
    # another job's). Only this job's trials count here.
    requeued = {t for t, _ in reaped.requeued} & set(trial_ids)
    # each trial went exactly one way: written by its late worker, or returned to the queue
    assert requeued.isdisjoint({t for t, ok in zip(trial_ids, written, strict=True) if ok})
    assert len(requeued) + written.count(True) == len(trial_ids)
    with session_scope(database_url) as session:
        states = {t.id: t.state for t in trial_store.history(session, job_id)}
    assert all(states[t] == ("queued" if t in requeued else "complete") for t in trial_ids)


def test_retry_cap_holds_against_redelivery(database_url: str) -> None:
    _, (trial_id,) = make_job(database_url, valid_configs(1, offset=200))
    for attempt in (1, 2, 3):
        c = claim(database_url, trial_id, f"w{attempt}")
        assert c is not None and c.attempt == attempt
        expire(database_url, trial_id)
        with session_scope(database_url) as session:
            trial_store.reap_expired_leases(session, lease_seconds=5, max_attempts=3)
    assert claim(database_url, trial_id, "w4") is None  # failed "crash": no fourth attempt
    assert not record(database_url, trial_id, 3)  # and the last worker cannot overwrite it


def test_db_retry_survives_a_short_outage_and_gives_up_on_a_long_one() -> None:
    calls = {"n": 0}

    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] < 3:
            raise OperationalError("SELECT 1", {}, Exception("server closed the connection"))
        return "ok"

    assert with_db_retry("test", flaky, deadline_seconds=10) == "ok" and calls["n"] == 3

    def down() -> None:
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    with pytest.raises(OperationalError):
        with_db_retry("test", down, deadline_seconds=0.5)
