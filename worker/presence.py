"""This worker process's presence in the database: a session-level advisory lock held on a connection
of its own for the process's lifetime (core/store/workers.py explains what housekeeping reads from it).

The connection is not pooled: a pool may close or hand out its connections at any time, and a lock must
live exactly as long as the process. The worker's heartbeat goes through this connection too, so after
a PostgreSQL restart the lock is taken again before the worker counts as live again.
"""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from kernelfarm.core.db import connect_args
from kernelfarm.core.settings import Settings
from kernelfarm.core.store import trials as trial_store
from kernelfarm.core.store import workers as worker_store

logger = logging.getLogger(__name__)

# After a beat that raised (its connection lost with a PostgreSQL restart, crash recovery or failover;
# or the database unreachable), the next one comes at once, then every RETRY_FRACTION of a heartbeat
# period until one succeeds, instead of a whole period later: a live worker holds its lock again a
# moment after the server's return if a beat failed while it was away, and at its first beat after the
# return otherwise (the beat that finds the connection gone is followed at once by one on a new
# connection). Housekeeping's silence for a lock from before the server's epoch counts on it
# (SILENCE_HEARTBEATS in core/store/workers.py).
RETRY_FRACTION = 0.25


def _pause_before_beat(heartbeat_s: float, failures: int) -> float:
    """A heartbeat period while beats succeed; after ``failures`` beats in a row raised, none for the
    first retry, then RETRY_FRACTION of a period."""
    if failures == 0:
        return heartbeat_s
    return 0.0 if failures == 1 else heartbeat_s * RETRY_FRACTION


class Presence:
    """Holds worker ``name``'s presence lock; :meth:`beat` (re)takes it when needed and heartbeats."""

    def __init__(self, settings: Settings, name: str) -> None:
        self.name = name
        self._engine: Engine = create_engine(settings.require_database_url(), poolclass=NullPool,
                                             connect_args=connect_args(settings))  # fmt: skip
        self._connection: Connection | None = None
        self._held = False
        # Trials an earlier process of this name left running are freed the first time this process
        # actually holds the lock, whenever that is: start() may fail (database down), or the lock
        # may still be held for a moment by the dead process's server backend.
        self._orphans_pending = True
        # One beat or stop at a time on the presence connection. A stop that gives up waiting writes its
        # mark on a connection of its own, and _stopped keeps the beat still running from committing
        # its heartbeat (which clears stopped_at) after it: see _beat.
        self._writing = threading.Lock()
        self._stopped = False
        # How long a stop waits for a beat in progress: the usual beat (a connect, then a statement or
        # two), not the worst one (several statements, each up to the statement timeout).
        self._stop_wait_s = settings.database_connect_timeout_seconds + settings.database_statement_timeout_seconds + 5

    def start(self, tries: int = 5, pause_s: float = 0.5) -> bool:
        """The first :meth:`beat`, at start-up, before this process claims anything: trials still
        running under its name were claimed by an earlier process of that name, now gone (it held the
        lock), and their leases end as soon as this process holds the lock instead of running out.

        A killed predecessor's server backend lets go of the lock a moment after the kill, so a lock
        found taken is tried again a few times before the worker goes on without it."""
        for _ in range(tries - 1):
            if self.beat():
                return True
            time.sleep(pause_s)
        return self.beat()

    def run(self, stop: threading.Event, heartbeat_s: float) -> None:
        """Beat every ``heartbeat_s`` until ``stop`` is set; after a beat that raised, again at once,
        then every ``RETRY_FRACTION * heartbeat_s`` until one succeeds (see RETRY_FRACTION)."""
        failures = 0
        while not stop.wait(_pause_before_beat(heartbeat_s, failures)):
            try:
                self.beat()  # the heartbeat, through the connection that holds the presence lock
            except Exception:
                failures += 1
                if failures == 1:
                    logger.warning("worker heartbeat failed; retrying at once, then every %.2f s until one "
                                   "succeeds", heartbeat_s * RETRY_FRACTION, exc_info=True)  # fmt: skip
                continue
            if failures:
                logger.warning("worker heartbeat back after %d failed tries", failures)
            failures = 0

    def claiming(self) -> None:
        """This process is about to claim a trial. From then on, trials running under its name may be
        its own, so a lock taken later must not end their leases: an earlier process's leftovers then
        wait for their lease (the fallback) instead."""
        self._orphans_pending = False

    def beat(self) -> bool:
        """Take the lock if this process does not hold it (first call, or the connection was lost
        with a PostgreSQL restart), then stamp the worker's heartbeat through the same connection.
        The first time this process takes the lock, before it has claimed anything, it also ends
        the leases of trials an earlier process of its name left running (see :meth:`start`).

        Returns:
            Whether the lock is held. False: another live process holds this worker name (it is
            logged; the heartbeat is still written, and the lock is tried again next time).

        Raises:
            SQLAlchemyError: the database cannot be reached (the caller retries on its next beat).
        """
        with self._writing:
            if self._stopped:
                return False
            try:
                return self._guarded_beat()
            finally:
                if self._stopped:  # a stop gave up waiting for this beat and left the connection to it
                    self.close()

    def _guarded_beat(self) -> bool:
        try:
            return self._beat()
        except DBAPIError as exc:
            # Only a lost connection loses the lock. Any other error (a statement timeout, a lock wait
            # on the worker's row) leaves the connection, and the lock with it, in place: dropping it
            # would let housekeeping judge this live process gone and requeue its trials.
            if exc.connection_invalidated:
                self._drop()
            raise

    def _beat(self) -> bool:
        if self._connection is None:
            self._connection = self._engine.connect()
            self._held = False
        with Session(bind=self._connection) as session:
            if not self._held:
                self._held = worker_store.take_presence(session, self.name)
                if not self._held:
                    logger.warning("another session holds worker %s's lock (a live process of that name, or a "
                                   "dead one's backend not yet gone); trying again next beat", self.name)  # fmt: skip
                elif self._orphans_pending and (ended := trial_store.expire_leases_of(session, [self.name])):
                    logger.warning("%d trial(s) of an earlier %s process go back to the queue", ended, self.name)
            worker_store.heartbeat_worker(session, self.name)
            # The row is locked by this transaction from its first write (take_presence's or the
            # heartbeat's) until its end, so a stop mark written on another connection lands either
            # after this commit, or before those writes and then _stopped is already seen here.
            if self._stopped:
                session.rollback()
                return False
            session.commit()
        if self._held:
            self._orphans_pending = False
        return self._held

    def _drop(self) -> None:
        connection, self._connection, self._held = self._connection, None, False
        if connection is not None:
            try:
                connection.invalidate()
            except SQLAlchemyError:
                logger.debug("closing the lost presence connection failed", exc_info=True)

    def stop(self) -> None:
        """The worker shuts down: mark it stopped, then release the lock (closing the connection does),
        in that order, so a stopped worker is never judged absent. A beat in progress finishes first;
        one that outlasts the wait is left its connection (it closes it), the mark goes through a
        connection of its own, and the beat rolls back instead of writing after the mark.
        """
        acquired = self._writing.acquire(timeout=self._stop_wait_s)
        if not acquired:
            logger.warning("a heartbeat of %s is still running after %.0f s; marking it stopped anyway",
                           self.name, self._stop_wait_s)  # fmt: skip
        try:
            self._stopped = True
            self._mark_stopped(self._connection if acquired else None)
        finally:
            if acquired:
                self._writing.release()
                self.close()

    def _mark_stopped(self, connection: Connection | None) -> None:
        """Write the stop mark through ``connection`` (the presence connection, held by no beat), or a
        fresh one when there is none or it fails: it may have been lost since the last beat."""
        if connection is not None:
            try:
                self._write_stop_mark(connection)
                return
            except SQLAlchemyError as exc:
                logger.info("marking %s stopped on its presence connection failed; trying a new one", self.name)
                if isinstance(exc, DBAPIError) and exc.connection_invalidated:
                    self._drop()  # lost, and the lock with it; a live one keeps the lock until the mark is in
        try:
            with self._engine.connect() as fresh:
                self._write_stop_mark(fresh)
        except SQLAlchemyError:
            logger.warning("could not mark worker %s stopped", self.name, exc_info=True)

    def _write_stop_mark(self, connection: Connection) -> None:
        with Session(bind=connection) as session:
            worker_store.stop_worker(session, self.name)
            session.commit()

    def close(self) -> None:
        """Release the lock (closing the connection does)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except SQLAlchemyError:  # the connection was already lost, and the lock with it
                logger.debug("closing the presence connection failed", exc_info=True)
        self._engine.dispose()
