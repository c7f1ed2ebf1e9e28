"""A job's trials as columns (one JSON list per field, in proposal order): what a dashboard plots; and
the job's best-so-far curve (the points where it improves), what the job page draws first.

PostgreSQL builds each column as a JSON array (json_agg) and the arrays are joined into one document as
text, so a 10,000-trial job costs one query and no JSON decoding in Python: decoding every trial's
config and metrics documents took ~0.9 s of the API's CPU at 10,000 trials on the 2-core VM."""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import Numeric, Text, cast, func, literal_column, select, text
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session, aliased
from sqlalchemy.sql.elements import ColumnElement

from kernelfarm.core.models import Kernel, Trial, TrialProfile
from kernelfarm.core.states import TrialState
from kernelfarm.core.store.jobs import get_job

# Measurement metrics kept per trial (worker/measuring: the roofline and the time split).
TRIAL_METRICS = (
    "arithmetic_intensity", "achieved_flops_per_s", "achieved_bytes_per_s", "roofline_fraction", "bound",
    "compile_s", "measure_wall_s",
)  # fmt: skip
# Nsight Compute metrics (worker/cuda/profile.py short names) shown next to the fastest trials.
PROFILE_METRICS = (
    "achieved_occupancy_pct", "dram_throughput_pct", "l2_hit_rate_pct", "sm_throughput_pct", "registers_per_thread",
)  # fmt: skip
# The GPU's measured ceilings, the same for every trial of a job (recorded with each roofline).
CEILING_METRICS = ("peak_flops_per_s", "peak_bytes_per_s", "peak_kind", "ridge_intensity")


def _column(expression: Any, seq: Any) -> ColumnElement[str]:
    """The expression's value per trial as a JSON array text, in proposal order."""
    aggregated = func.json_agg(aggregate_order_by(expression, seq))
    return cast(func.coalesce(aggregated, literal_column("'[]'::json")), Text)


def _seconds_since(column: Any, origin: Any) -> Any:
    return func.round(cast(func.extract("epoch", column - origin), Numeric), 4)


def _present(source: Any) -> list[Any]:
    """Per metric, how many trials carry it (a column absent from every trial is left out)."""
    present = [func.count(source.metrics[name]) for name in TRIAL_METRICS]
    return present + [func.count(TrialProfile.metrics[name]) for name in PROFILE_METRICS]


def trial_columns_json(
    session: Session, job_id: uuid.UUID, parameters: list[str] | None = None, limit: int | None = None
) -> str:
    """The job's trials as one JSON object of columns (see api/insight_schemas.TrialColumnsPublic).

    Args:
        parameters: the kernel's parameter names in display order (default: the stored space's keys,
            whose order JSONB does not keep).
        limit: only the first ``limit`` trials in proposal order (the job page's first table page);
            ``count`` and which metric columns are present still describe every trial of the job, so
            the slice has the same columns as the whole.
    """
    job = get_job(session, job_id)
    if parameters is None:
        kernel_space = session.execute(select(Kernel.space).where(Kernel.id == job.kernel_id)).scalar_one()
        parameters = list(kernel_space.get("parameters", {}))
    source: Any = Trial
    if limit is not None:
        first = select(Trial).where(Trial.job_id == job.id).order_by(Trial.seq).limit(limit).subquery()
        source = aliased(Trial, first)
    base: dict[str, Any] = {
        "id": source.id, "seq": source.seq, "state": source.state, "failure_kind": source.failure_kind,
        "time_ms": source.time_ms, "time_p20_ms": source.time_p20_ms, "time_p80_ms": source.time_p80_ms,
        "started_s": _seconds_since(source.started_at, job.created_at),
        "finished_s": _seconds_since(source.finished_at, job.created_at), "worker": source.worker_name,
    }  # fmt: skip
    config = {name: source.config[name] for name in parameters}
    metrics = {name: source.metrics[name] for name in TRIAL_METRICS}
    profile = {name: TrialProfile.metrics[name] for name in PROFILE_METRICS}
    columns: list[Any] = [func.count(source.id)]
    columns += [_column(e, source.seq) for group in (base, config, metrics, profile) for e in group.values()]
    joined = select().select_from(source).outerjoin(TrialProfile, TrialProfile.trial_id == source.id)
    if limit is None:
        joined = joined.where(Trial.job_id == job.id)
    # The count and the metrics present come from the whole job: with the arrays when they cover it, in a
    # query of their own for a slice (so the slice has the same columns as the whole).
    row = session.execute(joined.add_columns(*columns, *(_present(source) if limit is None else ()))).one()
    values, present_from = iter(row[1 : len(columns)]), len(columns)
    if limit is not None:
        row = session.execute(
            select(func.count(Trial.id), *_present(Trial))
            .select_from(Trial)
            .outerjoin(TrialProfile, TrialProfile.trial_id == Trial.id)
            .where(Trial.job_id == job.id)
        ).one()
        present_from = 1
    count, counts = row[0], dict(zip([*TRIAL_METRICS, *PROFILE_METRICS], row[present_from:], strict=True))

    def section(names: dict[str, Any], keep: bool = True) -> str:
        parts = []
        for name in names:
            array = next(values)
            if keep or counts[name]:
                parts.append(f"{json.dumps(name)}:{array}")
        return "{" + ",".join(parts) + "}"

    head = ",".join(f"{json.dumps(name)}:{next(values)}" for name in base)
    config_json = section(config)
    metrics_json = section(metrics, keep=False)
    profile_json = section(profile, keep=False)
    ceiling_row = session.execute(
        select(Trial.metrics).where(Trial.job_id == job.id, Trial.metrics.has_key("peak_flops_per_s")).limit(1)
    ).scalar_one_or_none()
    ceilings = {name: ceiling_row.get(name) for name in CEILING_METRICS} if ceiling_row else None
    meta = {"job_id": str(job.id), "kernel": job.kernel_name, "count": count, "parameters": parameters}
    return (
        json.dumps(meta)[:-1]
        + f',{head},"config":{config_json},"metrics":{metrics_json},"profile":{profile_json},'
        + f'"ceilings":{json.dumps(ceilings)}}}'
    )


# Finished trials in the order they finished (ties: proposal order), the best complete time so far after
# each, and the rows where it improves plus the last one: a step line through them is the whole curve.
# Seconds are rounded like trial_columns_json's finished_s, so both give the same order.
_CONVERGENCE = text(f"""
WITH finished AS (
    SELECT seq, state, time_ms, round(extract(epoch FROM finished_at - :created)::numeric, 4) AS wall_s
    FROM trials
    WHERE job_id = :job AND state IN ('{TrialState.COMPLETE}', '{TrialState.FAILED}') AND finished_at IS NOT NULL
), ranked AS (
    SELECT row_number() OVER w AS evaluation, wall_s, count(*) OVER () AS finished,
           min(time_ms) FILTER (WHERE state = '{TrialState.COMPLETE}') OVER (w ROWS UNBOUNDED PRECEDING) AS best_ms
    FROM finished
    WINDOW w AS (ORDER BY wall_s, seq)
), steps AS (
    SELECT evaluation, wall_s, best_ms, finished, lag(best_ms) OVER (ORDER BY evaluation) AS before
    FROM ranked
)
SELECT evaluation, wall_s, best_ms, finished FROM steps
WHERE best_ms IS NOT NULL AND (before IS NULL OR best_ms < before OR evaluation = finished)
ORDER BY evaluation
""")


def convergence(session: Session, job_id: uuid.UUID) -> dict[str, Any]:
    """The job's best time so far after each finished trial, as the points where it improves (and the
    last finished trial): ``evaluations`` (1-based count of finished trials), ``wall_s`` (seconds since
    the job was created), ``best_ms``, and ``finished`` (how many trials finished)."""
    job = get_job(session, job_id)
    rows = session.execute(_CONVERGENCE, {"job": job.id, "created": job.created_at}).all()
    finished = rows[-1].finished if rows else _finished_count(session, job.id)
    return {
        "job_id": str(job.id),
        "finished": int(finished),
        "evaluations": [int(r.evaluation) for r in rows],
        "wall_s": [float(r.wall_s) for r in rows],
        "best_ms": [float(r.best_ms) for r in rows],
    }


def _finished_count(session: Session, job_id: uuid.UUID) -> int:
    """Finished trials of a job none of whose trials completed (the curve is empty)."""
    return session.execute(
        select(func.count(Trial.id)).where(
            Trial.job_id == job_id,
            Trial.state.in_((TrialState.COMPLETE, TrialState.FAILED)),
            Trial.finished_at.is_not(None),
        )
    ).scalar_one()
