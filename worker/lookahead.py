"""Compile ahead: the queued trials of the job a worker is serving, as measure requests.

With prefetch 1 a worker holds one message at a time, but Postgres knows what is queued next for
the same job and GPU model. Handing those to ``Backend.prepare`` lets the cuda backend compile them
on the host's CPU cores while the GPU measures the current trial, so the GPU does not wait for
NVRTC; and while the trial it was sent still compiles, the runner claims and measures queued
trials that are compiled already (their own messages are skipped later as not claimable).
Another worker may claim one of them first; the compiled module is then simply unused (or reused
from the compile cache on the same host).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelfarm.core.models import Job, Trial
from kernelfarm.core.states import ProfileMode, TrialState
from kernelfarm.worker.backends.base import MeasureRequest


def request_seed(job_seed: int, trial_id: int) -> int:
    """Input seed of a trial: fresh per trial, reproducible from the job's seed."""
    return (job_seed * 1_000_003 + trial_id) & 0x7FFFFFFF


@dataclass(frozen=True)
class QueuedTrial:
    trial_id: int
    request: MeasureRequest


def queued_trials(session: Session, job_id: uuid.UUID, limit: int) -> list[QueuedTrial]:
    """The job's next ``limit`` queued trials, in dispatch order, as measure requests."""
    job = session.get_one(Job, job_id)
    rows = session.execute(
        select(Trial.id, Trial.config)
        .where(Trial.job_id == job_id, Trial.state == TrialState.QUEUED.value)
        .order_by(Trial.seq)
        .limit(limit)
    ).all()
    return [
        QueuedTrial(
            row.id,
            MeasureRequest(
                kernel_name=job.kernel_name,
                problem=dict(job.problem),
                config=dict(row.config),
                profile=job.profile == ProfileMode.ALL.value,
                seed=request_seed(int(job.seed), row.id),
            ),
        )
        for row in rows
    ]
