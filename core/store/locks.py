"""Transaction-scoped PostgreSQL advisory locks by name: what makes "count, then insert" one step
where concurrent requests would otherwise all count before any committed."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session


def hold_until_commit(session: Session, name: str) -> None:
    """Wait for, then hold until the transaction ends, the advisory lock of ``name`` (hashed to the
    lock's 32-bit key: two names may share a lock, which only serializes them)."""
    session.execute(select(func.pg_advisory_xact_lock(func.hashtext(name))))
