"""Retrying a worker's database actions through an outage (e.g. a Postgres restart)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

logger = logging.getLogger(__name__)

T = TypeVar("T")
# How long a worker keeps retrying a database write through an outage (e.g. a Postgres restart).
# Giving up earlier would throw away a finished measurement and burn one of the trial's attempts.
DB_RETRY_SECONDS = 60.0


def with_db_retry(what: str, action: Callable[[], T], deadline_seconds: float = DB_RETRY_SECONDS) -> T:
    """Run a database action, retrying connection-level failures (a Postgres restart) with backoff.

    Only connection-level DBAPI errors are retried (an operational or interface error, or a
    connection the pool invalidated); each attempt is its own transaction, and every write the runner
    makes through this is conditional on the lease, so running one twice is harmless. A statement
    the server refuses for its content (a data or integrity error) fails the same way on every try:
    it is raised at once, not retried for a minute while the trial holds its GPU.
    """
    deadline = time.monotonic() + deadline_seconds
    delay = 0.2
    while True:
        try:
            return action()
        except DBAPIError as exc:
            if not _transient(exc) or time.monotonic() + delay > deadline:
                raise
            logger.warning("%s: database unavailable; retrying in %.1f s", what, delay, exc_info=True)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


def _transient(exc: DBAPIError) -> bool:
    """Would the same statement succeed once the database is back?"""
    return isinstance(exc, (OperationalError, InterfaceError)) or bool(exc.connection_invalidated)
