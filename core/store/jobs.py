"""Jobs: creation, queries, progress, cancellation and the terminal transitions."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Float, func, select, update
from sqlalchemy.orm import Session

from kernelfarm.core.errors import InvalidInput, NotFound
from kernelfarm.core.models import Job, Kernel, Trial
from kernelfarm.core.objectives import ENERGY_MISSING, measures_energy
from kernelfarm.core.states import JobState, TrialState
from kernelfarm.core.store.text import storable


@dataclass(frozen=True)
class NewJob:
    kernel_id: int
    kernel_name: str
    problem: dict[str, Any]
    problem_key: str
    gpu_model: str
    space: dict[str, Any]
    strategy: str
    strategy_options: dict[str, Any]
    seed: int
    budget_trials: int | None
    budget_seconds: float | None
    parallelism: int
    profile: str
    profile_top_k: int
    warm_start: bool
    owner: str
    objective: str = "time"  # "time", "energy" or "time+energy" (tuner/objective.py)


@dataclass(frozen=True)
class Progress:
    counts: dict[str, int]
    best: Trial | None

    @property
    def finished(self) -> int:
        return sum(self.counts.get(s, 0) for s in (TrialState.COMPLETE, TrialState.FAILED))

    @property
    def in_flight(self) -> int:
        return sum(self.counts.get(s, 0) for s in (TrialState.QUEUED, TrialState.RUNNING))

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def create_job(session: Session, new: NewJob) -> Job:
    job = Job(**new.__dict__, state=JobState.QUEUED.value, status_message="waiting for the coordinator")
    session.add(job)
    session.flush()
    return job


def parse_job_id(job_id: str | uuid.UUID) -> uuid.UUID:
    if isinstance(job_id, uuid.UUID):
        return job_id
    try:
        return uuid.UUID(str(job_id))
    except ValueError:
        raise NotFound(f"job {job_id!r} not found") from None


def get_job(session: Session, job_id: str | uuid.UUID, *, for_update: bool = False) -> Job:
    query = select(Job).where(Job.id == parse_job_id(job_id))
    if for_update:
        # Serializes coordinator steps of one job across processes.
        query = query.with_for_update()
    job = session.execute(query).scalar_one_or_none()
    if job is None:
        raise NotFound(f"job {job_id} not found")
    return job


def kernel_version(session: Session, job: Job) -> int:
    """The version of its kernel the job measures: for an uploaded kernel, maybe not the latest."""
    return session.get_one(Kernel, job.kernel_id).version


def list_jobs(
    session: Session,
    *,
    state: str | None = None,
    kernel: str | None = None,
    gpu_model: str | None = None,
    owner: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> tuple[Sequence[Job], int]:
    if state is not None and state not in {s.value for s in JobState}:
        raise InvalidInput(f"state must be one of {[s.value for s in JobState]}")
    query = select(Job)
    if state:
        query = query.where(Job.state == state)
    if kernel:
        query = query.where(Job.kernel_name == kernel)
    if gpu_model:
        query = query.where(Job.gpu_model == gpu_model)
    if owner:
        query = query.where(Job.owner == owner)
    total = session.execute(select(func.count()).select_from(query.subquery())).scalar_one()
    rows = session.execute(query.order_by(Job.created_at.desc(), Job.id).limit(limit).offset(offset)).scalars()
    return rows.all(), int(total)


def count_unfinished(session: Session, owner: str) -> int:
    return int(
        session.execute(
            select(func.count())
            .select_from(Job)
            .where(Job.owner == owner, Job.state.in_([JobState.QUEUED.value, JobState.RUNNING.value]))
        ).scalar_one()
    )


def job_progress(session: Session, job_id: uuid.UUID, objective: str = "time") -> Progress:
    counts = dict(
        session.execute(select(Trial.state, func.count()).where(Trial.job_id == job_id).group_by(Trial.state)).all()
    )
    best = best_trial_of_job(session, job_id, objective)
    return Progress(counts={str(k): int(v) for k, v in counts.items()}, best=best)


def best_trial_of_job(session: Session, job_id: uuid.UUID, objective: str = "time") -> Trial | None:
    """The job's best trial under ``objective``: the fastest for ``time``. For the energy objectives
    only trials with an energy reading count (one the meter gave up on keeps its time and says why in
    ``metrics[ENERGY_MISSING]``, but cannot win): the least energy for ``energy``, the fastest such
    trial for ``time+energy`` (the front's fastest point, which /v1/best?objective=pareto reports first).
    Failed and unverified trials never count."""
    query = select(Trial).where(
        Trial.job_id == job_id, Trial.state == TrialState.COMPLETE.value, Trial.verified.is_(True)
    )
    energy = Trial.metrics["energy_mj"].astext
    if measures_energy(objective):
        query = query.where(energy.is_not(None))
    order = [energy.cast(Float).asc()] if objective == "energy" else []
    return session.execute(query.order_by(*order, Trial.time_ms.asc(), Trial.seq.asc()).limit(1)).scalar_one_or_none()


def energy_missing(session: Session, job_id: uuid.UUID) -> tuple[int, str | None]:
    """How many of the job's complete trials say why they have no energy reading, and one such reason
    (the latest)."""
    reason = Trial.metrics[ENERGY_MISSING].astext
    where = (Trial.job_id == job_id, Trial.state == TrialState.COMPLETE.value, reason.is_not(None))
    count = session.execute(select(func.count()).select_from(Trial).where(*where)).scalar_one()
    latest = session.execute(select(reason).where(*where).order_by(Trial.seq.desc()).limit(1)).scalar_one_or_none()
    return int(count), latest


def energy_readings(session: Session, job_id: uuid.UUID) -> int:
    """How many of the job's complete trials have an energy reading."""
    where = (Trial.job_id == job_id, Trial.state == TrialState.COMPLETE.value, Trial.metrics["energy_mj"].is_not(None))
    return int(session.execute(select(func.count()).select_from(Trial).where(*where)).scalar_one())


def set_job_status(session: Session, job: Job, *, state: JobState | None = None, message: str | None = None) -> None:
    if state is not None and job.state != state.value:
        job.state = state.value
        if state == JobState.RUNNING and job.started_at is None:
            job.started_at = func.now()
        if state.finished:
            job.finished_at = func.now()
    if message is not None:
        job.status_message = storable(message)


def last_activity(session: Session, job: Job) -> Any:
    """When the job last showed life: its creation, start, or a trial starting or finishing (database clock)."""
    latest = session.execute(
        select(func.greatest(func.max(Trial.started_at), func.max(Trial.finished_at))).where(Trial.job_id == job.id)
    ).scalar_one()
    moments = [m for m in (job.created_at, job.started_at, latest) if m is not None]
    return max(moments)


def fail_job(session: Session, job: Job, message: str) -> None:
    """End an unfinished job as failed; its queued and running trials are cancelled (a late result
    write of a running one is a no-op, like after a cancel)."""
    session.execute(
        update(Trial)
        .where(Trial.job_id == job.id, Trial.state.in_([TrialState.QUEUED.value, TrialState.RUNNING.value]))
        .values(state=TrialState.CANCELLED.value, finished_at=func.now())
    )
    set_job_status(session, job, state=JobState.FAILED, message=message)


def cancel_job(session: Session, job_id: str | uuid.UUID) -> Job:
    """Cancel a job and its unfinished trials. Idempotent: cancelling a finished job changes nothing."""
    job = get_job(session, job_id, for_update=True)
    if JobState(job.state).finished:
        return job
    session.execute(
        update(Trial)
        .where(Trial.job_id == job.id, Trial.state.in_([TrialState.QUEUED.value, TrialState.RUNNING.value]))
        .values(state=TrialState.CANCELLED.value, finished_at=func.now())
    )
    set_job_status(session, job, state=JobState.CANCELLED, message="cancelled by request")
    session.flush()
    session.refresh(job)
    return job
