"""Read-only figures about the farm as a whole: queue depth per GPU model, busy workers, recent failures,
trial counts and time distributions. The dashboard's fleet page and the Prometheus /metrics read them."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Float, Select, case, cast, func, select
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Session

from kernelfarm.core.models import GpuWorker, Job, Trial, TrialProfile
from kernelfarm.core.states import JobState, TrialState
from kernelfarm.core.store.workers import live_clause


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


def _trial_groups() -> Select[Any]:
    """Trial counts per (state, failure kind or "", GPU model, worker if running)."""
    running_worker = case((Trial.state == TrialState.RUNNING.value, Trial.worker_name), else_=None)
    kind = func.coalesce(Trial.failure_kind, "")
    return select(Trial.state, kind, Trial.gpu_model, running_worker, func.count()).group_by(
        Trial.state, kind, Trial.gpu_model, running_worker
    )


def _waiting_jobs() -> Select[str, int]:
    return select(Job.gpu_model, func.count()).where(Job.state == JobState.QUEUED.value).group_by(Job.gpu_model)


def trial_summary(session: Session) -> TrialSummary:
    """Everything /v1/fleet needs from the trials and jobs tables, in two queries."""
    return _summarize(session.execute(_trial_groups()).all(), session.execute(_waiting_jobs()).all())


def _summarize(rows: Sequence[Sequence[Any]], waiting: Sequence[Sequence[Any]]) -> TrialSummary:
    summary = TrialSummary()
    loads: dict[str, ModelLoad] = defaultdict(ModelLoad)
    for state, failure_kind, model, worker, count in rows:
        summary.counts[(state, failure_kind)] = summary.counts.get((state, failure_kind), 0) + count
        if state == TrialState.QUEUED.value:
            loads[model].queued_trials += count
        elif state == TrialState.RUNNING.value:
            loads[model].running_trials += count
            if worker is not None:
                summary.busy[worker] = summary.busy.get(worker, 0) + count
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


def _distribution_columns(values: dict[str, Any], source: Select[Any], bounds: Sequence[float]) -> Select[Any]:
    """One scan: the values are computed once per row (a materialized CTE; a bucket's filter would
    otherwise extract them from the JSONB again, 15 times per row), then counted per bucket: one row of
    (bucket counts..., sum, count) per value."""
    rows = (
        source.with_only_columns(*(v.label(name) for name, v in values.items()))
        .cte(f"observed_{next(iter(values))}")  # one name per query: /metrics joins them in one statement
        .prefix_with("MATERIALIZED")
    )
    columns: list[Any] = []
    for name in values:
        value = rows.c[name]
        columns += [func.count().filter(value <= b) for b in bounds]
        columns += [func.coalesce(func.sum(value), 0.0), func.count(value)]
    return select(*columns).select_from(rows)


def _unpack(row: Sequence[Any], names: Sequence[str], bounds: Sequence[float]) -> dict[str, Distribution]:
    out, width = {}, len(bounds) + 2
    for k, name in enumerate(names):
        part = row[k * width : (k + 1) * width]
        out[name] = Distribution(tuple(bounds), tuple(part[: len(bounds)]), float(part[-2]), int(part[-1]))
    return out


def _time_distribution_queries(bounds: Sequence[float]) -> list[tuple[Select[Any], list[str]]]:
    """Seconds per finished trial: ``trial`` (claim to result), ``measure`` (the measuring child's wall
    time), ``compile`` (NVRTC) and ``profile`` (a trial's share of its ncu batch). Backends that do not
    compile or profile (replay, fake) leave those out."""
    finished = (TrialState.COMPLETE.value, TrialState.FAILED.value)
    trial_values = {
        "trial": func.extract("epoch", Trial.finished_at - Trial.started_at),
        "measure": cast(Trial.metrics["measure_wall_s"].astext, Float),
        "compile": cast(Trial.metrics["compile_s"].astext, Float),
    }
    profile_values = {"profile": cast(TrialProfile.metrics["ncu_wall_s"].astext, Float)}
    return [
        (_distribution_columns(trial_values, select(Trial.id).where(Trial.state.in_(finished)), bounds),
         list(trial_values)),
        (_distribution_columns(profile_values, select(TrialProfile.trial_id), bounds), list(profile_values)),
    ]  # fmt: skip


def time_distributions(session: Session, bounds: Sequence[float]) -> dict[str, Distribution]:
    out: dict[str, Distribution] = {}
    for query, names in _time_distribution_queries(bounds):
        out |= _unpack(session.execute(query).one(), names, bounds)
    return out


@dataclass(frozen=True)
class FarmFigures:
    """What /metrics reports from the database: the trial summary, the live workers per (GPU model,
    backend) and how many of them are measuring a trial, and the time distributions."""

    summary: TrialSummary
    live: dict[tuple[str, str], int]
    busy: dict[str, int]
    distributions: dict[str, Distribution]


def _as_json_rows(query: Select[*tuple[Any, ...]]) -> Any:
    """The query's rows as one JSON array of arrays (``[]`` when there is none)."""
    rows = query.subquery()
    array = func.json_build_array(*rows.c)
    return select(func.coalesce(func.json_agg(array), func.json_build_array())).scalar_subquery()


@lru_cache(maxsize=8)
def _farm_statement(
    dialect: Dialect, ttl_seconds: float, bounds: tuple[float, ...]
) -> tuple[str, dict[str, Any], list[list[str]]]:
    """The statement of :func:`farm_figures`, compiled once: building and keying this SQLAlchemy construct
    (70 aggregates) took 15-20 ms of Python per scrape on the loaded 2-core VM, more than PostgreSQL took
    to answer it. Returns the driver-level SQL, its parameters and the distribution names per part."""
    distributions = _time_distribution_queries(bounds)
    live = select(GpuWorker.name, GpuWorker.gpu_model, GpuWorker.backend).where(live_clause(ttl_seconds))
    parts = [_as_json_rows(_trial_groups()), _as_json_rows(_waiting_jobs()), _as_json_rows(live)]
    parts += [select(func.json_build_array(*query.subquery().c)).scalar_subquery() for query, _ in distributions]
    statement = select(*(part.label(f"part{k}") for k, part in enumerate(parts)))
    # render_postcompile: the IN lists become plain parameters, which the driver-level call needs.
    compiled = statement.compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
    return str(compiled), dict(compiled.params), [names for _, names in distributions]


def farm_figures(session: Session, ttl_seconds: float, bounds: Sequence[float]) -> FarmFigures:
    """Everything /metrics reads, in one statement and so one round trip (each cost 8-10 ms on the
    loaded 2-core VM). Each part is a scalar subquery whose rows PostgreSQL returns as a JSON array."""
    sql, parameters, distribution_names = _farm_statement(session.get_bind().dialect, ttl_seconds, tuple(bounds))
    row = session.connection().exec_driver_sql(sql, parameters).one()
    groups, waiting, workers, *distribution_rows = row
    summary = _summarize(groups, waiting)
    per_model: dict[tuple[str, str], int] = {}
    busy: dict[str, int] = {}
    for name, model, backend in workers:
        per_model[(model, backend)] = per_model.get((model, backend), 0) + 1
        busy[model] = busy.get(model, 0) + (1 if summary.busy.get(name) else 0)
    out: dict[str, Distribution] = {}
    for values, names in zip(distribution_rows, distribution_names, strict=True):
        out |= _unpack(values, names, bounds)
    return FarmFigures(summary, per_model, busy, out)
