"""This worker process's presence in the database: a session-level advisory lock held on a connection
of its own for the process's lifetime (core/store/workers.py explains what housekeeping reads from it).

The connection is not pooled: a pool may close or hand out its connections at any time, and a lock must
live exactly as long as the process. The worker's heartbeat goes through this connection too, so after
a PostgreSQL restart the lock is taken again before the worker counts as live again.
"""

from __future__ import annotations

import logging

from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from kernelfarm.core.db import connect_args
from kernelfarm.core.settings import Settings
from kernelfarm.core.store import trials as trial_store
from kernelfarm.core.store import workers as worker_store

logger = logging.getLogger(__name__)


class Presence:
    """Holds worker ``name``'s presence lock; :meth:`beat` (re)takes it when needed and heartbeats."""

    def __init__(self, settings: Settings, name: str) -> None:
        self.name = name
        self._engine: Engine = create_engine(settings.require_database_url(), poolclass=NullPool,
                                             connect_args=connect_args(settings))  # fmt: skip
        self._connection: Connection | None = None
        self._held = False

    def start(self) -> bool:
        """The first :meth:`beat`, at start-up, before this process claims anything: trials still
        running under its name were claimed by an earlier process of that name, now gone (it held the
        lock), and their leases end now instead of running out."""
        return self.beat(orphans=True)

    def beat(self, orphans: bool = False) -> bool:
        """Take the lock if this process does not hold it (first call, or the connection was lost
        with a PostgreSQL restart), then stamp the worker's heartbeat through the same connection.

        Args:
            orphans: also end the leases of trials running under this name (see :meth:`start`).

        Returns:
            Whether the lock is held. False: another live process holds this worker name (it is
            logged; the heartbeat is still written, and the lock is tried again next time).

        Raises:
            SQLAlchemyError: the database cannot be reached (the caller retries on its next beat).
        """
        try:
            return self._beat(orphans)
        except SQLAlchemyError:
            self._drop()
            raise

    def _beat(self, orphans: bool) -> bool:
        if self._connection is None:
            self._connection = self._engine.connect()
            self._held = False
        with Session(bind=self._connection) as session:
            if not self._held:
                self._held = worker_store.take_presence(session, self.name)
                if not self._held:
                    logger.warning("another live process holds worker name %s; its trials are not this one's",
                                   self.name)  # fmt: skip
                elif orphans and (ended := trial_store.expire_leases_of(session, [self.name])):
                    logger.warning("%d trial(s) of an earlier %s process go back to the queue", ended, self.name)
            worker_store.heartbeat_worker(session, self.name)
            session.commit()
        return self._held

    def _drop(self) -> None:
        connection, self._connection, self._held = self._connection, None, False
        if connection is not None:
            try:
                connection.invalidate()
            except SQLAlchemyError:
                logger.debug("closing the lost presence connection failed", exc_info=True)

    def close(self) -> None:
        """Release the lock (closing the connection does) after the worker said it stopped."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        self._engine.dispose()
