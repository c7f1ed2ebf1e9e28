"""A job's trials as columns (one JSON list per field, in proposal order): what a dashboard plots.

PostgreSQL builds each column as a JSON array (json_agg) and the arrays are joined into one document as
text, so a 10,000-trial job costs one query and no JSON decoding in Python: decoding every trial's
config and metrics documents took ~0.9 s of the API's CPU at 10,000 trials on the 2-core VM."""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import Numeric, Text, cast, func, literal_column, select
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from kernelfarm.core.models import Kernel, Trial, TrialProfile
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


def _column(expression: Any) -> ColumnElement[str]:
    """The expression's value per trial as a JSON array text, in proposal order."""
    aggregated = func.json_agg(aggregate_order_by(expression, Trial.seq))
    return cast(func.coalesce(aggregated, literal_column("'[]'::json")), Text)


def _seconds_since(column: Any, origin: Any) -> Any:
    return func.round(cast(func.extract("epoch", column - origin), Numeric), 4)


def trial_columns_json(session: Session, job_id: uuid.UUID, parameters: list[str] | None = None) -> str:
    """The job's trials as one JSON object of columns (see api/insight_schemas.TrialColumnsPublic).

    Args:
        parameters: the kernel's parameter names in display order (default: the stored space's keys,
            whose order JSONB does not keep).
    """
    job = get_job(session, job_id)
    if parameters is None:
        kernel_space = session.execute(select(Kernel.space).where(Kernel.id == job.kernel_id)).scalar_one()
        parameters = list(kernel_space.get("parameters", {}))
    base: dict[str, Any] = {
        "id": Trial.id, "seq": Trial.seq, "state": Trial.state, "failure_kind": Trial.failure_kind,
        "time_ms": Trial.time_ms, "time_p20_ms": Trial.time_p20_ms, "time_p80_ms": Trial.time_p80_ms,
        "started_s": _seconds_since(Trial.started_at, job.created_at),
        "finished_s": _seconds_since(Trial.finished_at, job.created_at), "worker": Trial.worker_name,
    }  # fmt: skip
    config = {name: Trial.config[name] for name in parameters}
    metrics = {name: Trial.metrics[name] for name in TRIAL_METRICS}
    profile = {name: TrialProfile.metrics[name] for name in PROFILE_METRICS}
    present = [func.count(Trial.metrics[name]) for name in TRIAL_METRICS]
    present += [func.count(TrialProfile.metrics[name]) for name in PROFILE_METRICS]
    columns: list[Any] = [func.count(Trial.id)]
    columns += [_column(e) for group in (base, config, metrics, profile) for e in group.values()]
    row = session.execute(
        select(*columns, *present)
        .select_from(Trial)
        .outerjoin(TrialProfile, TrialProfile.trial_id == Trial.id)
        .where(Trial.job_id == job.id)
    ).one()
    count, values = row[0], iter(row[1 : 1 + len(columns) - 1])
    counts = dict(zip([*TRIAL_METRICS, *PROFILE_METRICS], row[len(columns) :], strict=True))

    def section(names: dict[str, Any], keep: bool = True) -> str:
        parts = []
        for name in names:
            text = next(values)
            if keep or counts[name]:
                parts.append(f"{json.dumps(name)}:{text}")
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
