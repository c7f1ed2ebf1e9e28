"""Deferred, batched Nsight Compute profiles of finished trials (table trial_profiles).

The coordinator requests profiles in batches (profile mode "all": every ``batch`` completed trials;
"top_k": the k fastest once the search is done); a GPU worker takes the batch in one ncu process
and records each profile once. A worker claims a batch's requests when it takes it; housekeeping
re-sends a request nobody claimed in time (lost message), or whose worker died (see stale_requests).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import ColumnElement, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from kernelfarm.core.models import Job, Trial, TrialProfile
from kernelfarm.core.states import TrialState
from kernelfarm.core.store.text import storable


def request_profiles(session: Session, job_id: uuid.UUID, trial_ids: Sequence[int]) -> list[int]:
    """Create profile requests; returns the ids that were not requested before."""
    if not trial_ids:
        return []
    inserted = session.execute(
        insert(TrialProfile)
        .values([{"trial_id": t, "job_id": job_id} for t in trial_ids])
        .on_conflict_do_nothing(index_elements=["trial_id"])
        .returning(TrialProfile.trial_id)
    ).scalars()
    return sorted(inserted)


def _complete_verified(job_id: uuid.UUID) -> ColumnElement[bool]:
    return (Trial.job_id == job_id) & (Trial.state == TrialState.COMPLETE.value) & Trial.verified.is_(True)


def unrequested_complete(session: Session, job_id: uuid.UUID) -> list[int]:
    """Completed trials with no profile request yet, in completion order (mode "all")."""
    requested = select(TrialProfile.trial_id).where(TrialProfile.job_id == job_id)
    return list(
        session.execute(
            select(Trial.id).where(_complete_verified(job_id), Trial.id.not_in(requested)).order_by(Trial.finished_at)
        ).scalars()
    )


def fastest_unrequested(session: Session, job_id: uuid.UUID, k: int) -> list[int]:
    """Of the job's k fastest completed trials, those not requested yet (mode "top_k")."""
    fastest = list(
        session.execute(
            select(Trial.id).where(_complete_verified(job_id)).order_by(Trial.time_ms, Trial.seq).limit(k)
        ).scalars()
    )
    requested = set(session.execute(select(TrialProfile.trial_id).where(TrialProfile.trial_id.in_(fastest))).scalars())
    return [t for t in fastest if t not in requested]


def outstanding(session: Session, job_id: uuid.UUID) -> int:
    return int(
        session.execute(
            select(func.count()).where(TrialProfile.job_id == job_id, TrialProfile.profiled_at.is_(None))
        ).scalar_one()
    )


def record_profile(
    session: Session,
    trial_id: int,
    *,
    metrics: dict[str, Any] | None,
    error: str | None,
    worker_name: str,
    batch_size: int,
    wall_seconds: float,
) -> bool:
    """Store a profile once; a duplicate batch (redelivery) changes nothing."""
    result = session.execute(
        update(TrialProfile)
        .where(TrialProfile.trial_id == trial_id, TrialProfile.profiled_at.is_(None))
        .values(
            profiled_at=func.now(),
            metrics=storable(metrics),
            error=storable(error),
            worker_name=worker_name,
            batch_size=batch_size,
            wall_seconds=wall_seconds,
        )
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def claim(session: Session, trial_ids: Sequence[int], worker_name: str) -> set[int]:
    """Take the unanswered requests among ``trial_ids`` for ``worker_name``: those nobody claimed,
    or this same worker claimed before (a redelivery after it restarted). Returns the trial ids taken;
    a duplicate batch message finds its requests claimed by the live worker of the first and does
    nothing."""
    if not trial_ids:
        return set()
    taken = session.execute(
        update(TrialProfile)
        .where(
            TrialProfile.trial_id.in_(list(trial_ids)),
            TrialProfile.profiled_at.is_(None),
            (TrialProfile.claimed_at.is_(None)) | (TrialProfile.worker_name == worker_name),
        )
        .values(claimed_at=func.now(), worker_name=worker_name)
        .returning(TrialProfile.trial_id)
    ).scalars()
    return set(taken)


def stale_requests(
    session: Session, unclaimed_after: float, claimed_after: float, live_workers: Sequence[str]
) -> list[tuple[uuid.UUID, str, list[int]]]:
    """Requests to send again, grouped per job: (job id, gpu model, trial ids).

    A request is lost when no worker claimed it ``unclaimed_after`` seconds after it was sent (its
    message was lost: as fast as an unclaimed trial is re-sent), or when its claiming worker is no
    longer live, or when it was claimed more than ``claimed_after`` seconds ago without an answer (a
    batch that overran). Their claims are cleared and their timestamps renewed, so each is sent once
    per period.
    """
    now = func.now()
    lost = (
        TrialProfile.claimed_at.is_(None) & (TrialProfile.requested_at < now - timedelta(seconds=unclaimed_after))
    ) | (
        TrialProfile.claimed_at.is_not(None)
        & (
            TrialProfile.worker_name.not_in(list(live_workers))
            | (TrialProfile.claimed_at < now - timedelta(seconds=claimed_after))
        )
    )
    rows = session.execute(
        select(TrialProfile.trial_id, TrialProfile.job_id, Job.gpu_model)
        .join(Job, Job.id == TrialProfile.job_id)
        .where(TrialProfile.profiled_at.is_(None), lost)
        .with_for_update(of=TrialProfile, skip_locked=True)
    ).all()
    groups: dict[uuid.UUID, tuple[str, list[int]]] = {}
    for row in rows:
        groups.setdefault(row.job_id, (row.gpu_model, []))[1].append(row.trial_id)
    if rows:
        session.execute(
            update(TrialProfile)
            .where(TrialProfile.trial_id.in_([r.trial_id for r in rows]))
            .values(requested_at=func.now(), claimed_at=None, worker_name=None)
        )
    return [(job_id, model, ids) for job_id, (model, ids) in groups.items()]


def profiles_of(session: Session, trial_ids: Sequence[int]) -> dict[int, TrialProfile]:
    if not trial_ids:
        return {}
    rows = session.execute(select(TrialProfile).where(TrialProfile.trial_id.in_(trial_ids))).scalars()
    return {row.trial_id: row for row in rows}
