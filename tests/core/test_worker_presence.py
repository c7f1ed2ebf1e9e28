"""Presence locks on the real schema (core/store/workers.py, worker/presence.py): a lock that vanished
while its worker still heartbeats is not a dead worker; a restarted worker frees what its predecessor
left once it holds the lock, but never the trials it claimed itself."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import delete, func, select, text, update

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import GpuWorker, Job, Trial
from kernelfarm.core.settings import Settings
from kernelfarm.core.store import trials as trial_store
from kernelfarm.core.store import workers as worker_store
from kernelfarm.worker.presence import Presence
from tests.conftest import store_job

# A model of its own, and its rows deleted after each test: the session's database is shared with the
# modules after this one, whose farms decide what a GPU model's registered workers can run.
GPU_MODEL = "presence-test-gpu"
SILENT_S = 6.0


def register(database_url: str) -> str:
    name = f"presence-{uuid.uuid4().hex[:8]}@test"
    identity = worker_store.WorkerIdentity(name=name, hostname="test", backend="replay", gpu_model=GPU_MODEL,
                                           gpu_name="test GPU", queue="gpu.test")  # fmt: skip
    with session_scope(database_url) as session:
        worker_store.register_worker(session, identity)
    return name


def running_trial(database_url: str, worker_name: str) -> int:
    with session_scope(database_url) as session:
        job = store_job(session, "cn_pnpoly", GPU_MODEL)
        config = {"between_method": 0, "block_size_x": 32, "tile_size": 1, "use_method": 0}
        trial_store.add_trials(session, job, [("0,32,1,0", config)])
        trial_id = session.execute(select(Trial.id).where(Trial.job_id == job.id)).scalar_one()
    with session_scope(database_url) as session:
        assert trial_store.claim(session, trial_id, worker_name, None) is not None
    return trial_id


def lease_ended(database_url: str, trial_id: int) -> bool:
    with session_scope(database_url) as session:
        heartbeat = session.execute(text("SELECT heartbeat_at = '-infinity' FROM trials WHERE id = :id"),
                                    {"id": trial_id}).scalar_one()  # fmt: skip
    return bool(heartbeat)


def absent(database_url: str) -> list[str]:
    with session_scope(database_url) as session:
        return worker_store.absent_workers(session, SILENT_S)


@pytest.fixture
def settings(database_url: str) -> Iterator[Settings]:
    yield Settings(database_url=database_url)
    with session_scope(database_url) as session:
        jobs = select(Job.id).where(Job.gpu_model == GPU_MODEL)
        session.execute(delete(Trial).where(Trial.job_id.in_(jobs)))
        session.execute(delete(Job).where(Job.gpu_model == GPU_MODEL))
        session.execute(delete(GpuWorker).where(GpuWorker.gpu_model == GPU_MODEL))


def test_a_lost_lock_of_a_worker_that_still_heartbeats_is_not_a_death(database_url: str, settings: Settings) -> None:
    # The server can drop every session without a restart (crash recovery after one backend died, a
    # failover): the worker's lock is gone, but the worker lives and takes it again on its next beat.
    name = register(database_url)
    presence = Presence(settings, name)
    try:
        assert presence.start()
        assert name not in absent(database_url)
        assert presence._connection is not None
        pid = presence._connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        with session_scope(database_url) as session:
            assert session.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar_one()
        assert name not in absent(database_url)  # lock gone, but it heartbeat within SILENT_S
        with session_scope(database_url) as session:  # silent since: now it counts as gone
            session.execute(update(GpuWorker).where(GpuWorker.name == name)
                            .values(last_heartbeat=func.now() - text("interval '10 seconds'")))  # fmt: skip
        assert name in absent(database_url)
        with pytest.raises(Exception):  # noqa: B017 - the driver's error for the terminated connection
            presence.beat()
        assert presence.beat()  # a new connection takes the lock again and clears the stop mark
        with session_scope(database_url) as session:
            stopped = session.execute(select(GpuWorker.stopped_at).where(GpuWorker.name == name)).scalar_one()
            assert stopped is None
        assert name not in absent(database_url)
    finally:
        presence.close()


def test_a_restarted_worker_frees_its_predecessors_trials_once_it_holds_the_lock(
    database_url: str, settings: Settings
) -> None:
    name = register(database_url)
    old, new = Presence(settings, name), Presence(settings, name)
    try:
        assert old.start()
        trial_id = running_trial(database_url, name)
        # The predecessor's backend still holds the lock when the new process starts.
        assert not new.start(tries=1)
        assert not lease_ended(database_url, trial_id)
        old.close()  # the predecessor's backend goes
        assert new.beat()  # taken on a later beat: the leftovers are freed then, not a lease later
        assert lease_ended(database_url, trial_id)
    finally:
        old.close()
        new.close()


def test_a_worker_that_claimed_before_it_held_the_lock_keeps_its_own_trials(
    database_url: str, settings: Settings
) -> None:
    name = register(database_url)
    old, new = Presence(settings, name), Presence(settings, name)
    try:
        assert old.start()
        assert not new.start(tries=1)
        new.claiming()  # the new process claims before it holds the lock: trials under its name may be its own
        trial_id = running_trial(database_url, name)
        old.close()
        assert new.beat()
        assert not lease_ended(database_url, trial_id)  # left to the lease, not cut short
    finally:
        old.close()
        new.close()
