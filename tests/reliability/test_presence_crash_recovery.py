"""PostgreSQL crash recovery on a server of this module's own: it ends every session (so every presence
lock vanishes) while the workers live on, and keeps pg_postmaster_start_time(). The live worker must
not be judged dead; the unlogged presence_epoch table is what tells (core/store/workers.py)."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from kernelfarm.core.db import dispose_engines, session_scope
from kernelfarm.core.migrate import upgrade
from kernelfarm.core.settings import Settings
from kernelfarm.core.store import workers as worker_store
from kernelfarm.services import EmbeddedPostgres, wait_for
from kernelfarm.worker.presence import RETRY_FRACTION, Presence

SILENT_S = 6.0


@pytest.fixture(scope="module")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    postgres = EmbeddedPostgres(Path(tmp_path_factory.mktemp("crash-recovery")) / "postgres")
    postgres.start()
    try:
        engine = create_engine(postgres.url, isolation_level="AUTOCOMMIT")
        with engine.connect() as connection:
            connection.execute(text("CREATE DATABASE kernelfarm"))
        engine.dispose()
        url = postgres.url.rsplit("/", 1)[0] + "/kernelfarm"
        upgrade(url)
        yield url
    finally:
        dispose_engines()
        postgres.stop("immediate")


def scalar(url: str, sql: str) -> object:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return connection.execute(text(sql)).scalar()
    finally:
        engine.dispose()


def absent(url: str, silent_s: float = SILENT_S) -> list[str]:
    with session_scope(url) as session:
        return worker_store.absent_workers(session, silent_s)


def crash_one_backend(url: str) -> None:
    """kill -9 one client backend: the postmaster ends every other session and runs crash recovery."""
    engine = create_engine(url)
    connection = engine.connect()
    pid = int(connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
    os.kill(pid, signal.SIGKILL)
    connection.invalidate()
    engine.dispose()
    dispose_engines()  # the pooled connections died with the rest

    def serving() -> bool:
        try:
            return scalar(url, "SELECT 1") == 1
        except Exception:
            return False

    wait_for(serving, 60, "PostgreSQL to finish crash recovery")


def test_a_live_worker_is_not_judged_dead_after_crash_recovery(database_url: str) -> None:
    name = f"crash-{uuid.uuid4().hex[:8]}@test"
    identity = worker_store.WorkerIdentity(name=name, hostname="test", backend="replay", gpu_model="crash-test-gpu",
                                           gpu_name="test GPU", queue="gpu.test")  # fmt: skip
    with session_scope(database_url) as session:
        worker_store.register_worker(session, identity)
    presence = Presence(Settings(database_url=database_url), name)
    try:
        assert presence.start()
        assert absent(database_url) == []
        postmaster_started = scalar(database_url, "SELECT pg_postmaster_start_time()")
        crash_one_backend(database_url)
        # What the rule stands on: the restart time stayed, and the unlogged epoch was emptied.
        assert scalar(database_url, "SELECT pg_postmaster_start_time()") == postmaster_started
        assert scalar(database_url, "SELECT count(*) FROM presence_epoch") == 0
        assert absent(database_url) == []  # the epoch is unknown: nobody is judged, it is written
        assert absent(database_url) == []  # the lock is gone, but it was taken before the epoch
        with pytest.raises(Exception):  # noqa: B017 - the driver's error for the connection recovery ended
            presence.beat()
        assert presence.beat()  # its next beat takes the lock again
        assert absent(database_url) == []
        with session_scope(database_url) as session:  # this database's advisory locks: the presence's
            session.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
                    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                )
            )
        # Taken since the epoch: a vanished lock is a death at once. pg_terminate_backend only signals the
        # backend; the lock goes when it has exited (a moment later, once seen in a fresh-clone run).
        wait_for(lambda: absent(database_url) == [name], 5, "the terminated backend's lock to go")
    finally:
        presence.close()


def test_a_live_worker_takes_its_lock_again_well_within_the_silence(database_url: str) -> None:
    """The worker's heartbeat loop retries a failed beat at once, then every quarter period (it waited a
    whole period): after crash recovery it holds its lock again at its first beat after the server's
    return, well within housekeeping's silence (SILENCE_HEARTBEATS periods from the epoch)."""
    heartbeat_s = 2.0  # the default
    name = f"retry-{uuid.uuid4().hex[:8]}@test"
    identity = worker_store.WorkerIdentity(name=name, hostname="test", backend="replay", gpu_model="crash-test-gpu",
                                           gpu_name="test GPU", queue="gpu.test")  # fmt: skip
    with session_scope(database_url) as session:
        worker_store.register_worker(session, identity)
    presence = Presence(Settings(database_url=database_url, heartbeat_seconds=heartbeat_s), name)
    beats: list[tuple[float, bool]] = []  # (when, held the lock); False also for a beat that raised
    beat = presence.beat

    def watched_beat() -> bool:
        try:
            held = beat()
        except Exception:
            beats.append((time.monotonic(), False))
            raise
        beats.append((time.monotonic(), held))
        return held

    stop = threading.Event()
    loop = threading.Thread(target=presence.run, args=(stop, heartbeat_s), daemon=True)
    try:
        assert presence.start()
        presence.beat = watched_beat  # type: ignore[method-assign]
        loop.start()
        crash_one_backend(database_url)
        assert absent(database_url) == []  # the epoch is unknown: nobody is judged, it is written now
        epoch = time.monotonic()
        wait_for(lambda: any(not held for _, held in beats) and beats[-1][1], 20, "a failed beat, then the lock")
        last_failure = max(at for at, held in beats if not held)
        back = min(at for at, held in beats if held and at > last_failure)
        # At once after a lost connection, or a quarter period after a failure while the server was away.
        assert back - last_failure <= RETRY_FRACTION * heartbeat_s + 0.5, f"{back - last_failure:.2f} s"
        silence_s = worker_store.SILENCE_HEARTBEATS * heartbeat_s
        assert back - epoch < heartbeat_s + 1.0 < silence_s, f"the lock again {back - epoch:.2f} s after the epoch"
        assert name not in absent(database_url, silence_s)
    finally:
        stop.set()
        loop.join(10)
        presence.close()
