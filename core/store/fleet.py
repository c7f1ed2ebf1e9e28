"""Read-only figures about the farm as a whole: queue depth per GPU model, busy workers, recent failures,
trial counts and time distributions. The dashboard's fleet page and the Prometheus /metrics read them."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Float, Select, case, cast, func, select
from sqlalchemy.orm import Session

from kernelfarm.core.models import Job, Trial, TrialProfile
from kernelfarm.core.states import JobState, TrialState


@dataclass
class ModelLoad:
    """Trials of one GPU model waiting for a worker (queued) and being measured (running), and jobs
    still waiting for their first dispatch."""

    queued_trials: int = 0
    running_trials: int = 0
    waiting_jobs: int = 0


@dataclass
class TrialSummary:
    """Trial counts by (state, failure kind or ""), load per GPU model, and running trials per worker."""

    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    loads: dict[str, ModelLoad] = field(default_factory=dict)
    busy: dict[str, int] = field(default_factory=dict)


def trial_summary(session: Session) -> TrialSummary:
    """Everything /metrics and /v1/fleet need from the trials and jobs tables, in two queries (a round
    trip cost 8-10 ms on the loaded 2-core VM: seven of them were most of a scrape)."""
    summary = TrialSummary()
    running_worker = case((Trial.state == TrialState.RUNNING.value, Trial.worker_name), else_=None)
    kind = func.coalesce(Trial.failure_kind, "")
    rows = session.execute(
        select(Trial.state, kind, Trial.gpu_model, running_worker, func.count())
        .group_by(Trial.state, kind, Trial.gpu_model, running_worker)
    ).all()  # fmt: skip
    loads: dict[str, ModelLoad] = defaultdict(ModelLoad)
    for state, failure_kind, model, worker, count in rows:
        summary.counts[(state, failure_kind)] = summary.counts.get((state, failure_kind), 0) + count
        if state == TrialState.QUEUED.value:
            loads[model].queued_trials += count
        elif state == TrialState.RUNNING.value:
            loads[model].running_trials += count
            if worker is not None:
                summary.busy[worker] = summary.busy.get(worker, 0) + count
    waiting = session.execute(
        select(Job.gpu_model, func.count()).where(Job.state == JobState.QUEUED.value).group_by(Job.gpu_model)
    ).all()
    for model, count in waiting:
        loads[model].waiting_jobs = count
    summary.loads = dict(loads)
    return summary


@dataclass(frozen=True)
class RecentFailure:
    trial_id: int
    job_id: uuid.UUID
    kernel: str
    gpu_model: str
    failure_kind: str | None
    failure_message: str | None
    worker_name: str | None
    finished_at: datetime | None


def recent_failures(session: Session, limit: int = 20) -> list[RecentFailure]:
    rows = session.execute(
        select(
            Trial.id,
            Trial.job_id,
            Trial.kernel_name,
            Trial.gpu_model,
            Trial.failure_kind,
            Trial.failure_message,
            Trial.worker_name,
            Trial.finished_at,
        )
        .where(Trial.state == TrialState.FAILED.value)
        .order_by(Trial.finished_at.desc().nulls_last(), Trial.id.desc())
        .limit(limit)
    ).all()
    return [RecentFailure(*row) for row in rows]


@dataclass(frozen=True)
class Distribution:
    """Cumulative bucket counts (``counts[i]`` = observations ≤ ``bounds[i]``), their sum and count:
    a Prometheus histogram computed from rows instead of observed in a process."""

    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    total: float
    count: int


def _distributions(session: Session, values: dict[str, Any], source: Select[Any], bounds: Sequence[float]
                   ) -> dict[str, Distribution]:  # fmt: skip
    """One scan: the values are computed once per row (a materialized CTE; a bucket's filter would
    otherwise extract them from the JSONB again, 15 times per row), then counted per bucket."""
    rows = (
        source.with_only_columns(*(v.label(name) for name, v in values.items()))
        .cte("observed")
        .prefix_with("MATERIALIZED")
    )
    columns: list[Any] = []
    for name in values:
        value = rows.c[name]
        columns += [func.count().filter(value <= b) for b in bounds]
        columns += [func.coalesce(func.sum(value), 0.0), func.count(value)]
    row = session.execute(select(*columns).select_from(rows)).one()
    out, width = {}, len(bounds) + 2
    for k, name in enumerate(values):
        part = row[k * width : (k + 1) * width]
        out[name] = Distribution(tuple(bounds), tuple(part[: len(bounds)]), float(part[-2]), int(part[-1]))
    return out


def time_distributions(session: Session, bounds: Sequence[float]) -> dict[str, Distribution]:
    """Seconds per finished trial: ``trial`` (claim to result), ``measure`` (the measuring child's wall
    time), ``compile`` (NVRTC) and ``profile`` (a trial's share of its ncu batch). Backends that do not
    compile or profile (replay, fake) leave those out."""
    finished = (TrialState.COMPLETE.value, TrialState.FAILED.value)
    trials = select(Trial.id).where(Trial.state.in_(finished))
    out = _distributions(session, {
        "trial": func.extract("epoch", Trial.finished_at - Trial.started_at),
        "measure": cast(Trial.metrics["measure_wall_s"].astext, Float),
        "compile": cast(Trial.metrics["compile_s"].astext, Float),
    }, trials, bounds)  # fmt: skip
    profiles = select(TrialProfile.trial_id)
    out |= _distributions(session, {"profile": cast(TrialProfile.metrics["ncu_wall_s"].astext, Float)}, profiles,
                          bounds)  # fmt: skip
    return out
