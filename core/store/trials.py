"""Trials: the lifecycle state machine.

queued → running (lease: worker, attempt, heartbeat from the database clock) → complete | failed |
cancelled. Finished trials never change. Every write after the claim names its attempt, so a stale
or duplicate delivery is a no-op.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import Row, and_, func, literal, select, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Session

from kernelfarm.core.measurement import Measurement
from kernelfarm.core.models import Job, Kernel, Trial
from kernelfarm.core.states import FailureKind, JobState, TrialState
from kernelfarm.core.store.text import storable


@dataclass(frozen=True)
class Claim:
    """A worker's lease on a trial: everything it needs to measure, plus its attempt number."""

    trial_id: int
    attempt: int
    job_id: uuid.UUID
    kernel_name: str
    problem: dict[str, Any]
    config: dict[str, Any]
    profile: str
    seed: int
    kernel_version: int = 1  # the version the job pinned (its kernels row)
    objective: str = "time"  # the job's: whether the trial is metered for energy (core/objectives.py)


def history(session: Session, job_id: uuid.UUID) -> Sequence[Trial]:
    return session.execute(select(Trial).where(Trial.job_id == job_id).order_by(Trial.seq)).scalars().all()


def history_rows(session: Session, job_id: uuid.UUID) -> Sequence[Row[Any]]:
    """The job's trials as the coordinator steps on them: state, config and outcome only. Loading
    whole rows decoded every trial's times_ms/metrics/provenance JSON on every step, 3-4x the cost
    of this query at a few hundred trials (docs/SCALING.md)."""
    return session.execute(
        select(
            Trial.id,
            Trial.config,
            Trial.state,
            Trial.time_ms,
            Trial.verified,
            Trial.failure_kind,
            Trial.provenance["proposed_by"].astext.label("proposed_by"),
            Trial.metrics["energy_mj"].astext.label("energy_mj"),
        )
        .where(Trial.job_id == job_id)
        .order_by(Trial.seq)
    ).all()


def add_trials(
    session: Session,
    job: Job,
    configs: Sequence[tuple[str, Mapping[str, Any]]],
    proposed_by: Mapping[str, str] | None = None,
) -> list[Trial]:
    """Insert queued trials for (key, config) pairs, continuing the job's sequence numbers.
    ``proposed_by`` (config key -> proposer) goes into the trial's provenance for configs that
    the strategy's own model did not choose (an LLM arm)."""
    last_seq = select(func.coalesce(func.max(Trial.seq), -1)).where(Trial.job_id == job.id)
    next_seq = session.execute(last_seq).scalar_one()
    trials = [
        Trial(
            job_id=job.id,
            seq=next_seq + 1 + i,
            kernel_name=job.kernel_name,
            gpu_model=job.gpu_model,
            problem_key=job.problem_key,
            config=dict(config),
            config_key=key,
            state=TrialState.QUEUED.value,
            attempt=0,
            metrics={},
            provenance={"proposed_by": proposed_by[key]} if proposed_by and key in proposed_by else {},
        )
        for i, (key, config) in enumerate(configs)
    ]
    session.add_all(trials)
    session.flush()
    return trials


def mark_dispatched(session: Session, trial_ids: Sequence[int]) -> None:
    if trial_ids:
        session.execute(update(Trial).where(Trial.id.in_(trial_ids)).values(dispatched_at=func.now()))


def claim(session: Session, trial_id: int, worker_name: str, gpu_uuid: str | None) -> Claim | None:
    """Take the lease on a queued trial of a live job. Returns None when the trial is not queued
    (already claimed by another delivery, finished, or cancelled): the caller then does nothing."""
    row = session.execute(
        update(Trial)
        .where(
            Trial.id == trial_id,
            Trial.state == TrialState.QUEUED.value,
            Trial.job_id == Job.id,
            Job.state.in_([JobState.QUEUED.value, JobState.RUNNING.value]),
        )
        .values(
            state=TrialState.RUNNING.value,
            attempt=Trial.attempt + 1,
            worker_name=worker_name,
            gpu_uuid=gpu_uuid,
            heartbeat_at=func.now(),
            lease_ended_at=None,
            started_at=func.now(),
        )
        .returning(Trial.id, Trial.attempt, Trial.job_id, Trial.config)
    ).one_or_none()
    if row is None:
        return None
    job = session.get_one(Job, row.job_id)
    kernel = session.get_one(Kernel, job.kernel_id)
    return Claim(
        trial_id=row.id,
        attempt=row.attempt,
        job_id=row.job_id,
        kernel_name=job.kernel_name,
        problem=dict(job.problem),
        config=dict(row.config),
        profile=job.profile,
        seed=int(job.seed),
        kernel_version=kernel.version,
        objective=job.objective,
    )


def _lease_is(trial_id: int, attempt: int):
    return and_(Trial.id == trial_id, Trial.attempt == attempt, Trial.state == TrialState.RUNNING.value)


def heartbeat(session: Session, trial_id: int, attempt: int) -> bool:
    """Extend the lease. False when the lease was lost (reaped, cancelled, or finished elsewhere)."""
    result = session.execute(update(Trial).where(_lease_is(trial_id, attempt)).values(heartbeat_at=func.now()))
    return bool(result.rowcount)  # type: ignore[attr-defined]


def record_result(session: Session, trial_id: int, attempt: int, measurement: Measurement) -> bool:
    """Write the outcome of attempt ``attempt``. Returns False (and writes nothing) when that
    attempt no longer holds the lease: duplicates and late workers change nothing."""
    values: dict[str, Any] = {
        "finished_at": func.now(),
        "metrics": storable(measurement.metrics),
        # merged: what the coordinator recorded at proposal time (proposed_by) stays
        "provenance": Trial.provenance.op("||")(literal(storable(measurement.provenance), type_=JSONB)),
        "verified": measurement.verified,
    }
    if measurement.timing is not None:
        values |= {
            "state": TrialState.COMPLETE.value,
            "time_ms": measurement.timing.median_ms,
            "time_p20_ms": measurement.timing.p20_ms,
            "time_p80_ms": measurement.timing.p80_ms,
            "times_ms": list(measurement.timing.times_ms),
        }
    else:
        assert measurement.failure is not None
        values |= {
            "state": TrialState.FAILED.value,
            "failure_kind": measurement.failure.value,
            "failure_message": storable(measurement.failure_message),
            "verified": False,
        }
    result = session.execute(update(Trial).where(_lease_is(trial_id, attempt)).values(**values))
    return bool(result.rowcount)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Reaped:
    requeued: list[tuple[int, str]]  # (trial id, gpu model) to send again
    failed: list[int]
    job_ids: set[uuid.UUID]


def reap_expired_leases(session: Session, lease_seconds: float, max_attempts: int) -> Reaped:
    """Running trials whose heartbeat is older than the lease, or whose lease was ended because their
    worker is gone (:func:`expire_leases_of`): back to queued, or failed with kind "crash" once their
    worker was lost ``max_attempts`` times while measuring them (a trial that keeps killing its
    worker). Their heartbeat stays the last one their worker wrote, and ``lease_ended_at`` says when an
    early end was decided.

    Only one trial per lost worker is charged with the loss: its oldest claim, the one it was
    measuring (a worker measures its claims in order, and holds a second one queued behind the
    first, see worker/runner.py). Charging both made a config that was merely queued behind another
    fail as "crash" after three kills of its workers that it had no part in: 2-7 of 1044 trials in
    the fault runs, once the job's fastest config (docs/RELIABILITY.md)."""
    expired = (
        session.execute(
            select(Trial)
            .where(
                Trial.state == TrialState.RUNNING.value,
                (Trial.heartbeat_at < func.now() - timedelta(seconds=lease_seconds)) | Trial.lease_ended_at.isnot(None),
            )
            .with_for_update(skip_locked=True)
        )
        .scalars()
        .all()
    )

    def claimed(trial: Trial) -> tuple[float, int]:
        return (trial.started_at.timestamp() if trial.started_at else 0.0, trial.id)

    measured: dict[str | None, Trial] = {}  # each lost worker's oldest claim
    for trial in expired:
        oldest = measured.get(trial.worker_name)
        if oldest is None or claimed(trial) < claimed(oldest):
            measured[trial.worker_name] = trial
    requeued, failed, jobs = [], [], set()
    for trial in expired:
        jobs.add(trial.job_id)
        if measured[trial.worker_name] is trial:
            trial.losses += 1
        if trial.losses >= max_attempts:
            trial.state = TrialState.FAILED.value
            trial.failure_kind = FailureKind.CRASH.value
            trial.failure_message = (
                f"worker lost {trial.losses} times while measuring this config (last: {trial.worker_name}); "
                "not retried again"
            )
            trial.finished_at = func.now()
            failed.append(trial.id)
        else:
            trial.state = TrialState.QUEUED.value
            trial.worker_name = None
            trial.dispatched_at = func.now()
            requeued.append((trial.id, trial.gpu_model))
    session.flush()
    return Reaped(requeued=requeued, failed=failed, job_ids=jobs)


def expire_leases_of(session: Session, worker_names: Sequence[str]) -> int:
    """End the leases of every trial running under ``worker_names`` now (processes known to be gone):
    :func:`reap_expired_leases` then requeues them, or fails them at the retry cap, as if the lease
    had run out. Their heartbeat is left as the worker last wrote it. Returns how many leases ended."""
    if not worker_names:
        return 0
    result = session.execute(
        update(Trial)
        .where(
            Trial.state == TrialState.RUNNING.value,
            Trial.worker_name.in_(list(worker_names)),
            Trial.lease_ended_at.is_(None),
        )
        .values(lease_ended_at=func.now())
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def cancel_queued(session: Session, job_id: uuid.UUID) -> int:
    """Cancel the job's trials that no worker has claimed (running ones finish). Conditional on the
    state, so a claim racing it either wins (the trial runs) or finds it cancelled. Returns how many."""
    result = session.execute(
        update(Trial)
        .where(Trial.job_id == job_id, Trial.state == TrialState.QUEUED.value)
        .values(state=TrialState.CANCELLED.value, finished_at=func.now())
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def stale_queued(session: Session, older_than_seconds: float, gpu_models: Sequence[str]) -> list[tuple[int, str]]:
    """Queued trials dispatched long ago and never claimed: their message may be lost (broker
    restart). Re-sending is safe because a claim only succeeds once per attempt. Only for
    ``gpu_models`` with a live worker: for the others the message is still waiting in its queue,
    and re-sending would only pile up duplicates there."""
    rows = session.execute(
        select(Trial.id, Trial.gpu_model)
        .join(Job, Job.id == Trial.job_id)
        .where(
            Trial.state == TrialState.QUEUED.value,
            Trial.gpu_model.in_(list(gpu_models)),
            Job.state.in_([JobState.QUEUED.value, JobState.RUNNING.value]),
            func.coalesce(Trial.dispatched_at, Trial.created_at) < func.now() - timedelta(seconds=older_than_seconds),
        )
        .with_for_update(of=Trial, skip_locked=True)
    ).all()
    ids = [r.id for r in rows]
    mark_dispatched(session, ids)
    return [(r.id, r.gpu_model) for r in rows]


def list_trials(
    session: Session,
    job_id: uuid.UUID,
    *,
    state: str | None = None,
    order: str = "seq",
    limit: int = 100,
    offset: int = 0,
) -> tuple[Sequence[Trial], int]:
    query = select(Trial).where(Trial.job_id == job_id)
    if state:
        query = query.where(Trial.state == state)
    total = session.execute(select(func.count()).select_from(query.subquery())).scalar_one()
    ordering = (Trial.time_ms.asc().nulls_last(), Trial.seq) if order == "time" else (Trial.seq,)
    rows = session.execute(query.order_by(*ordering).limit(limit).offset(offset)).scalars().all()
    return rows, int(total)
