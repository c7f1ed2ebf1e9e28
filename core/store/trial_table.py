"""A job's trials as columns (one list per field, in proposal order): what a dashboard plots. Only the
fields the plots and the trial table use are read; a 10,000-trial job is one query and no ORM objects."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

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


def _seconds(at: datetime | None, origin: datetime) -> float | None:
    return None if at is None else round((at - origin).total_seconds(), 4)


def trial_columns(session: Session, job_id: uuid.UUID) -> dict[str, Any]:
    job = get_job(session, job_id)
    # The kernel's parameter order (a job's restriction may name only some of them).
    kernel_space = session.execute(select(Kernel.space).where(Kernel.id == job.kernel_id)).scalar_one()
    parameters = list(kernel_space.get("parameters", {}))
    rows = session.execute(
        select(
            Trial.id,
            Trial.seq,
            Trial.state,
            Trial.failure_kind,
            Trial.time_ms,
            Trial.time_p20_ms,
            Trial.time_p80_ms,
            Trial.config,
            Trial.metrics,
            Trial.started_at,
            Trial.finished_at,
            Trial.worker_name,
            TrialProfile.metrics,
        )
        .outerjoin(TrialProfile, TrialProfile.trial_id == Trial.id)
        .where(Trial.job_id == job.id)
        .order_by(Trial.seq)
    ).all()
    origin = job.created_at
    columns: dict[str, list[Any]] = {
        name: []
        for name in (
            "id",
            "seq",
            "state",
            "failure_kind",
            "time_ms",
            "time_p20_ms",
            "time_p80_ms",
            "started_s",
            "finished_s",
            "worker",
        )
    }
    config: dict[str, list[Any]] = {name: [] for name in parameters}
    metrics: dict[str, list[Any]] = {name: [] for name in TRIAL_METRICS}
    profile: dict[str, list[Any]] = {name: [] for name in PROFILE_METRICS}
    ceilings: dict[str, Any] = {}
    for row in rows:
        (trial_id, seq, state, kind, time_ms, p20, p80, cfg, trial_metrics, started, finished, worker, ncu) = row
        for name, value in (("id", trial_id), ("seq", seq), ("state", state), ("failure_kind", kind),
                            ("time_ms", time_ms), ("time_p20_ms", p20), ("time_p80_ms", p80),
                            ("started_s", _seconds(started, origin)), ("finished_s", _seconds(finished, origin)),
                            ("worker", worker)):  # fmt: skip
            columns[name].append(value)
        for name in parameters:
            config[name].append(cfg.get(name))
        trial_metrics = trial_metrics or {}
        for name in TRIAL_METRICS:
            metrics[name].append(trial_metrics.get(name))
        if not ceilings and "peak_flops_per_s" in trial_metrics:
            ceilings = {name: trial_metrics.get(name) for name in CEILING_METRICS}
        ncu = ncu or {}
        for name in PROFILE_METRICS:
            profile[name].append(ncu.get(name))
    return {
        "job_id": str(job.id),
        "kernel": job.kernel_name,
        "count": len(rows),
        "parameters": parameters,
        **columns,
        "config": config,
        "metrics": {k: v for k, v in metrics.items() if any(x is not None for x in v)},
        "profile": {k: v for k, v in profile.items() if any(x is not None for x in v)},
        "ceilings": ceilings or None,
    }
