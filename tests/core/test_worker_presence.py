"""Presence locks on the real schema (core/store/workers.py, worker/presence.py): a lock taken since the
server's epoch that vanished is a dead worker at once; one from before the epoch needs silence too; a
restarted worker frees what its predecessor left once it holds the lock, but never the trials it
claimed itself; a stopped worker stays stopped; names that share a 31-bit hash have locks of their own.
(A real crash recovery: tests/reliability/test_presence_crash_recovery.py.)"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import delete, func, select, text, update

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import GpuWorker, Job, Trial
from kernelfarm.core.settings import Settings
from kernelfarm.core.store import trials as trial_store
from kernelfarm.core.store import workers as worker_store
from kernelfarm.services import wait_for
from kernelfarm.worker.presence import Presence
from tests.conftest import store_job

# A model of its own, and its rows deleted after each test: the session's database is shared with the
# modules after this one, whose farms decide what a GPU model's registered workers can run.
GPU_MODEL = "presence-test-gpu"
SILENT_S = 6.0


def register(database_url: str, name: str | None = None) -> str:
    name = name or f"presence-{uuid.uuid4().hex[:8]}@test"
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
        ended = session.execute(select(Trial.lease_ended_at).where(Trial.id == trial_id)).scalar_one()
    return ended is not None


def backend_pid(presence: Presence) -> int:
    assert presence._connection is not None
    return int(presence._connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())


def terminate(database_url: str, pid: int) -> None:
    """End that session, and wait until its backend (and every lock it held) is gone."""
    with session_scope(database_url) as session:
        assert session.execute(text("SELECT pg_terminate_backend(:pid, 10000)"), {"pid": pid}).scalar_one()


def stopped_at(database_url: str, name: str) -> object:
    with session_scope(database_url) as session:
        return session.execute(select(GpuWorker.stopped_at).where(GpuWorker.name == name)).scalar_one()


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


def test_a_lock_taken_since_the_epoch_that_vanished_is_a_death_at_once(database_url: str, settings: Settings) -> None:
    # Nothing reinitialised the server since the lock was taken, so only the end of its session
    # (the process died, or an operator ended it) lets it go: no silence to wait for. (Before, the
    # worker had to be silent for 3 heartbeats as well: 6 s at the defaults.)
    name = register(database_url)
    presence = Presence(settings, name)
    try:
        assert presence.start()
        assert name not in absent(database_url)
        terminate(database_url, backend_pid(presence))
        assert name in absent(database_url)  # it heartbeat a moment ago, and still counts as gone
        assert stopped_at(database_url, name) is not None
        with pytest.raises(Exception):  # noqa: B017 - the driver's error for the terminated connection
            presence.beat()
        wait_for(presence.beat, 10, "the lock")  # alive after all: a new connection takes it again, clears the mark
        assert stopped_at(database_url, name) is None
        assert name not in absent(database_url)
    finally:
        presence.close()


def test_a_lock_from_before_the_epoch_is_judged_only_after_silence(database_url: str, settings: Settings) -> None:
    # Crash recovery ends every session, so every lock vanishes while the workers live on, and it
    # empties the unlogged presence_epoch table (shown on a real server in tests/reliability): here the
    # row is deleted and the session ended by hand.
    name = register(database_url)
    presence = Presence(settings, name)
    with session_scope(database_url) as session:  # the shared session database's epoch, put back after
        epoch = session.execute(text("SELECT started_at FROM presence_epoch WHERE id = 1")).scalar_one_or_none()
    try:
        assert presence.start()
        with session_scope(database_url) as session:
            session.execute(text("DELETE FROM presence_epoch"))
        terminate(database_url, backend_pid(presence))
        assert absent(database_url) == []  # the epoch is unknown: nobody is judged, the epoch is written
        assert name not in absent(database_url)  # its lock predates the epoch, and it heartbeat lately
        with session_scope(database_url) as session:  # silent since well before the epoch
            session.execute(update(GpuWorker).where(GpuWorker.name == name)
                            .values(last_heartbeat=func.now() - text("interval '1 hour'")))  # fmt: skip
        assert name not in absent(database_url)  # the silence counts from the epoch, only just written
        with session_scope(database_url) as session:
            session.execute(text("UPDATE presence_epoch SET started_at = now() - interval '1 minute'"))
        assert name in absent(database_url)  # silent for a minute since the epoch: gone
        with pytest.raises(Exception):  # noqa: B017 - the driver's error for the terminated connection
            presence.beat()
        wait_for(presence.beat, 10, "the lock")  # once the ended session has let it go
        assert name not in absent(database_url)
        terminate(database_url, backend_pid(presence))  # a lock taken after the epoch again: at once
        assert name in absent(database_url)
    finally:
        presence.close()
        with session_scope(database_url) as session:
            session.execute(text("DELETE FROM presence_epoch"))
            if epoch is not None:
                session.execute(text("INSERT INTO presence_epoch (id, started_at) VALUES (1, :at)"), {"at": epoch})


def test_names_that_share_a_31_bit_hash_hold_locks_of_their_own(database_url: str, settings: Settings) -> None:
    # The lock key was hashtext(name) & 2**31-1: two names with one key could not both be present, and
    # a dead one hid behind the live one's lock. Two such names, found among 2**17 candidates.
    with session_scope(database_url) as session:
        first, second = session.execute(text(
            "SELECT min(n), max(n) FROM (SELECT 'presence-' || i || '@test' AS n FROM generate_series(1, 131072) i) s "
            "GROUP BY hashtext(n) & 2147483647 HAVING count(*) > 1 LIMIT 1"
        )).one()  # fmt: skip
    one, other = Presence(settings, register(database_url, first)), Presence(settings, register(database_url, second))
    try:
        assert one.start(tries=1) and other.start(tries=1)
        terminate(database_url, backend_pid(one))
        gone = absent(database_url)  # the session database is shared: other modules' workers may be in it
        assert first in gone and second not in gone
    finally:
        one.close()
        other.close()


def test_no_heartbeat_clears_the_stop_mark_of_a_worker_shutting_down(database_url: str, settings: Settings) -> None:
    # A beat still writing when the worker shut down used to commit its heartbeat, which clears
    # stopped_at, after the shutdown's stop mark (the shutdown waited 10 s for it; a beat may take the
    # 30 s statement timeout): the stopped worker then looked live.
    name = register(database_url)
    presence = Presence(settings, name)
    try:
        assert presence.start()
        with session_scope(database_url) as blocker:  # holds the worker's row: the next beat waits on it
            blocker.execute(select(GpuWorker).where(GpuWorker.name == name).with_for_update())
            beat = threading.Thread(target=presence.beat)
            beat.start()
            time.sleep(0.5)
            stop = threading.Thread(target=presence.stop)
            stop.start()
            time.sleep(0.5)
            assert stop.is_alive()  # the stop waits for the beat in progress
        beat.join(30)
        stop.join(30)
        assert not stop.is_alive()
        assert stopped_at(database_url, name) is not None
        assert not presence.beat()  # a beat after the stop (a heartbeat thread not joined in time)
        assert stopped_at(database_url, name) is not None
        assert name not in absent(database_url)  # a stopped worker is not judged absent
    finally:
        presence.close()


def test_a_stop_that_gives_up_waiting_for_a_beat_still_wins(database_url: str, settings: Settings) -> None:
    # A beat runs several statements, each bounded by the statement timeout, so it can outlast the
    # stop's wait. The stop then wrote its mark through the beat's own connection, from another thread
    # (one transaction for both), and the beat's heartbeat could still clear stopped_at after it.
    name = register(database_url)
    presence = Presence(settings, name)
    presence._stop_wait_s = 1.0  # the beat below waits on a row lock for longer than that
    try:
        assert presence.start()
        errors: list[BaseException] = []

        def run(target: Callable[[], object]) -> None:
            try:
                target()
            except BaseException as exc:  # reported by the assertion below
                errors.append(exc)

        with session_scope(database_url) as blocker:  # holds the worker's row: the beat waits on it
            blocker.execute(select(GpuWorker).where(GpuWorker.name == name).with_for_update())
            beat = threading.Thread(target=run, args=(presence.beat,))
            beat.start()
            time.sleep(0.5)
            stop = threading.Thread(target=run, args=(presence.stop,))
            stop.start()
            time.sleep(2.5)  # the stop has given up waiting; its mark waits on the row lock too
            assert beat.is_alive()
        beat.join(30)
        stop.join(30)
        assert not beat.is_alive() and not stop.is_alive()
        assert errors == []
        assert stopped_at(database_url, name) is not None
        assert not presence.beat()
        assert stopped_at(database_url, name) is not None
    finally:
        presence.close()


def test_the_stop_mark_survives_a_lost_presence_connection(database_url: str, settings: Settings) -> None:
    # The presence connection died earlier (PostgreSQL restarted, or an operator ended the session):
    # the stop mark used to fail on it, and the stopped worker was later judged absent.
    name = register(database_url)
    presence = Presence(settings, name)
    try:
        assert presence.start()
        terminate(database_url, backend_pid(presence))
        presence.stop()
        assert stopped_at(database_url, name) is not None
    finally:
        presence.close()


def test_an_ended_lease_keeps_the_workers_last_heartbeat(database_url: str, settings: Settings) -> None:
    # The lease of a gone worker's trial used to be ended by writing '-infinity' as its heartbeat,
    # and the reaper left that on the rows it requeued or failed.
    name = register(database_url)
    trial_id = running_trial(database_url, name)
    with session_scope(database_url) as session:
        heartbeat = session.execute(select(Trial.heartbeat_at).where(Trial.id == trial_id)).scalar_one()
        assert trial_store.expire_leases_of(session, [name]) == 1
    with session_scope(database_url) as session:
        reaped = trial_store.reap_expired_leases(session, lease_seconds=3600, max_attempts=3)
        assert [trial for trial, _ in reaped.requeued] == [trial_id]
    with session_scope(database_url) as session:
        row = session.execute(select(Trial).where(Trial.id == trial_id)).scalar_one()
        assert row.state == "queued" and row.heartbeat_at == heartbeat and row.lease_ended_at is not None
    with session_scope(database_url) as session:  # the next attempt's lease is a fresh one
        assert trial_store.claim(session, trial_id, name, None) is not None
    with session_scope(database_url) as session:
        assert session.execute(select(Trial.lease_ended_at).where(Trial.id == trial_id)).scalar_one() is None
        assert trial_store.reap_expired_leases(session, lease_seconds=3600, max_attempts=3).requeued == []


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
        old.close()  # the predecessor's backend goes (the server lets the lock go a moment after)
        wait_for(new.beat, 10, "the lock")  # taken on a later beat: the leftovers are freed then, not a lease later
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
        wait_for(new.beat, 10, "the lock")  # the server lets the closed session's lock go a moment after
        assert not lease_ended(database_url, trial_id)  # left to the lease, not cut short
    finally:
        old.close()
        new.close()
