"""Response schemas of the read endpoints the dashboard needs beyond the core resources: the fleet's
load, a job's trials as columns and its convergence, a kernel's results, the strategy names."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from kernelfarm.api.schemas import WorkerPublic


class GpuModelLoadPublic(BaseModel):
    gpu_model: str
    live_workers: int
    busy_workers: int = Field(description="live workers measuring a trial now")
    busy_fraction: float = Field(description="busy_workers / live_workers (0 when none is live)")
    queued_trials: int = Field(description="queue depth: trials dispatched and not yet claimed")
    running_trials: int
    waiting_jobs: int = Field(description="jobs accepted and waiting for their first dispatch")
    problem_memory_limit_bytes: int = Field(
        description="the most device memory a job's problem on this model may need (POST /v1/jobs refuses more): "
        "the least total memory its workers registered, else the farm's KERNELFARM_MAX_PROBLEM_BYTES"
    )


class FleetWorkerPublic(WorkerPublic):
    running_trials: int = 0


class FailurePublic(BaseModel):
    trial_id: int
    job_id: uuid.UUID
    kernel: str
    gpu_model: str
    failure_kind: str | None
    failure_message: str | None
    worker_name: str | None
    finished_at: datetime | None


class FleetPublic(BaseModel):
    gpu_models: list[GpuModelLoadPublic]
    workers: list[FleetWorkerPublic]
    recent_failures: list[FailurePublic]


class TrialColumnsPublic(BaseModel):
    """Every trial of a job, one list per field in proposal order (index i of each list = one trial).
    ``started_s``/``finished_s`` are seconds since the job was created."""

    job_id: uuid.UUID
    kernel: str
    count: int = Field(description="trials of the job (with `limit`, the lists hold only the first `limit`)")
    parameters: list[str] = Field(description="the kernel's parameters, in its spec's order")
    id: list[int]
    seq: list[int]
    state: list[str]
    failure_kind: list[str | None]
    time_ms: list[float | None]
    time_p20_ms: list[float | None]
    time_p80_ms: list[float | None]
    started_s: list[float | None]
    finished_s: list[float | None]
    worker: list[str | None]
    config: dict[str, list[Any]] = Field(description="parameter name → its value per trial")
    metrics: dict[str, list[Any]] = Field(description="roofline and time-split metrics present in any trial")
    profile: dict[str, list[Any]] = Field(description="Nsight Compute metrics of profiled trials (null elsewhere)")
    ceilings: dict[str, Any] | None = Field(description="the GPU's measured roofline ceilings, when recorded")


class ConvergencePublic(BaseModel):
    """A job's best time so far, at the finished trials where it improved and at the last one. Index i of
    each list is one point: after ``evaluations[i]`` finished trials (``wall_s[i]`` seconds after the job
    was created) the fastest complete one took ``best_ms[i]``."""

    job_id: uuid.UUID
    finished: int = Field(description="trials finished (complete or failed)")
    evaluations: list[int]
    wall_s: list[float]
    best_ms: list[float]


class KernelVersionPublic(BaseModel):
    version: int
    source_hash: str
    created_at: datetime
    jobs: int


class BestCellPublic(BaseModel):
    gpu_model: str
    problem_key: str
    problem: dict[str, Any]
    time_ms: float
    trial_id: int
    job_id: uuid.UUID
    version: int


class KernelResultsPublic(BaseModel):
    kernel: str
    versions: list[KernelVersionPublic]
    best: list[BestCellPublic] = Field(description="fastest verified trial per GPU model x problem")


class StrategiesPublic(BaseModel):
    names: list[str]
    default: str
