"""Per kernel: the versions the farm has seen, and the best verified time per GPU model x problem."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.orm import Session

from kernelfarm.core.models import Job, Kernel, Trial
from kernelfarm.core.states import TrialState


@dataclass(frozen=True)
class KernelVersion:
    version: int
    source_hash: str
    created_at: datetime
    jobs: int


def kernel_versions(session: Session, name: str) -> list[KernelVersion]:
    jobs = select(func.count()).where(Job.kernel_id == Kernel.id).scalar_subquery()
    rows = session.execute(
        select(Kernel.version, Kernel.source_hash, Kernel.created_at, jobs)
        .where(Kernel.name == name)
        .order_by(Kernel.version.desc(), Kernel.created_at.desc())
    ).all()
    return [KernelVersion(*row) for row in rows]


@dataclass(frozen=True)
class BestCell:
    gpu_model: str
    problem_key: str
    problem: dict[str, Any]
    time_ms: float
    trial_id: int
    job_id: uuid.UUID
    version: int


def best_matrix(session: Session, name: str) -> list[BestCell]:
    """The fastest complete, verified trial per (GPU model, problem), over every version of the kernel
    (each cell says which version it was)."""
    rows = session.execute(
        select(Trial.gpu_model, Trial.problem_key, Job.problem, Trial.time_ms, Trial.id, Trial.job_id, Kernel.version)
        .join(Job, Job.id == Trial.job_id)
        .join(Kernel, Kernel.id == Job.kernel_id)
        .where(
            Trial.kernel_name == name,
            Trial.state == TrialState.COMPLETE.value,
            Trial.verified.is_(True),
            Trial.time_ms.is_not(None),
        )
        .order_by(Trial.gpu_model, Trial.problem_key, Trial.time_ms, Trial.id)
        .ext(distinct_on(Trial.gpu_model, Trial.problem_key))
    ).all()
    return [BestCell(m, k, dict(p), float(t), i, j, v) for m, k, p, t, i, j, v in rows]
