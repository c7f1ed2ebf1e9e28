"""Idempotency keys of job submissions: one job per (owner, key), also under concurrent requests."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from kernelfarm.core.errors import Conflict
from kernelfarm.core.models import JobIdempotencyKey


def job_for_key(session: Session, owner: str, key: str, request_hash: str) -> uuid.UUID | None:
    """The job this owner's key created, or None.

    Raises:
        Conflict: the key was used for a different request body.
    """
    row = session.execute(
        select(JobIdempotencyKey).where(JobIdempotencyKey.owner == owner, JobIdempotencyKey.key == key)
    ).scalar_one_or_none()
    if row is None:
        return None
    if row.request_hash != request_hash:
        raise Conflict(f"Idempotency-Key {key!r} was already used for a different request")
    return row.job_id


def claim_key(session: Session, owner: str, key: str, job_id: uuid.UUID, request_hash: str) -> uuid.UUID:
    """Record that ``job_id`` answers this key, unless another transaction did first.

    Returns the job that answers the key: ``job_id`` if this call claimed it, else the other
    transaction's job (the caller must then roll back its own). The INSERT waits on the primary key
    while a concurrent transaction holding the same key is open, so exactly one claim wins.
    """
    claimed = session.execute(
        insert(JobIdempotencyKey)
        .values(owner=owner, key=key, job_id=job_id, request_hash=request_hash)
        .on_conflict_do_nothing(index_elements=["owner", "key"])
        .returning(JobIdempotencyKey.job_id)
    ).scalar_one_or_none()
    if claimed is not None:
        return claimed
    winner = job_for_key(session, owner, key, request_hash)
    assert winner is not None  # the conflicting row committed before ON CONFLICT saw it
    return winner
