"""Trials as the optimizer sees them: observations, pending ones included, and warm-start priors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from kernelfarm.core.models import Job, Trial
from kernelfarm.core.space import SearchSpace
from kernelfarm.core.states import FailureKind, TrialState
from kernelfarm.tuner.strategies.base import Observation

PRIOR_LIMIT = 2000


def observations(trials: Sequence[Trial] | Sequence[Row[Any]]) -> list[Observation]:
    out = []
    for trial in trials:
        state = TrialState(trial.state)
        if state == TrialState.COMPLETE and trial.verified and trial.time_ms is not None:
            out.append(Observation(dict(trial.config), float(trial.time_ms)))
        elif state == TrialState.FAILED:
            out.append(Observation(dict(trial.config), None, FailureKind(trial.failure_kind or "crash")))
        elif state in (TrialState.QUEUED, TrialState.RUNNING):
            out.append(Observation(dict(trial.config), None, pending=True))
        # cancelled trials teach nothing but must not be proposed again: treat as pending.
        else:
            out.append(Observation(dict(trial.config), None, pending=True))
    return out


def prior_observations(session: Session, job: Job, space: SearchSpace) -> list[Observation]:
    """Finished trials of earlier jobs of the same kernel (other problem or GPU model), newest
    first, restricted to configs of this job's space."""
    rows = session.execute(
        select(Trial)
        .join(Job, Job.id == Trial.job_id)
        .where(
            Job.kernel_name == job.kernel_name,
            Job.id != job.id,
            Trial.state.in_([TrialState.COMPLETE.value, TrialState.FAILED.value]),
        )
        .order_by(Trial.finished_at.desc())
        .limit(PRIOR_LIMIT)
    ).scalars()
    return [o for o in observations(list(rows)) if not o.pending and space.contains(o.config, job.problem)]
