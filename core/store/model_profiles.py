"""Model profiles (table model_profiles): written once by ``kernelfarm profile-model --store``, then read,
until their owner (or an admin) deletes them."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, defer

from kernelfarm.core.errors import NotFound
from kernelfarm.core.models import ModelProfile


def save_profile(session: Session, owner: str, fields: dict[str, Any]) -> ModelProfile:
    row = ModelProfile(owner=owner, **fields)
    session.add(row)
    session.flush()
    return row


def list_profiles(session: Session, gpu_model: str | None, limit: int, offset: int) -> list[ModelProfile]:
    """The summaries only: each row's ``report`` (up to the API's body limit, 256 KiB of JSON) is not read.
    Loading and decoding it for a page of 500 summaries, which never show it, took the API 15 s of CPU and
    a gigabyte of memory per request (any read token could send four at once)."""
    query = (
        select(ModelProfile)
        .options(defer(ModelProfile.report, raiseload=True))
        .order_by(ModelProfile.created_at.desc(), ModelProfile.id)
    )
    if gpu_model is not None:
        query = query.where(ModelProfile.gpu_model == gpu_model)
    return list(session.execute(query.limit(limit).offset(offset)).scalars())


def get_profile(session: Session, profile_id: uuid.UUID) -> ModelProfile:
    row = session.get(ModelProfile, profile_id)
    if row is None:
        raise NotFound(f"no model profile {profile_id}")
    return row


def count_profiles(session: Session, owner: str) -> int:
    return int(session.execute(select(func.count()).where(ModelProfile.owner == owner)).scalar_one())


def profile_summary(session: Session, profile_id: uuid.UUID) -> ModelProfile:
    """The profile's row without its report (reading it raises).

    Raises:
        NotFound: no such profile.
    """
    summary = select(ModelProfile).options(defer(ModelProfile.report, raiseload=True))
    row = session.execute(summary.where(ModelProfile.id == profile_id)).scalar_one_or_none()
    if row is None:
        raise NotFound(f"no model profile {profile_id}")
    return row


def delete_profile(session: Session, profile_id: uuid.UUID) -> None:
    """Delete the profile, if this transaction is the one that deletes it.

    A concurrent delete of the same row waits for the first one's commit and then finds nothing: it
    raises rather than reporting a deletion it did not make (8 concurrent DELETEs answered 200 up to
    three times).

    Raises:
        NotFound: no such profile, or another transaction deleted it first.
    """
    deleted = session.execute(
        delete(ModelProfile).where(ModelProfile.id == profile_id).returning(ModelProfile.id)
    ).scalar_one_or_none()
    if deleted is None:
        raise NotFound(f"no model profile {profile_id}")
