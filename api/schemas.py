"""HTTP schemas: one per direction (Create = request body, Public = response)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kernelfarm.core.states import ProfileMode

ScalarValue = int | float | str
T = TypeVar("T")


class SpaceRestriction(BaseModel):
    """Narrow the kernel's search space for this job: fewer values and/or extra constraints."""

    model_config = ConfigDict(extra="forbid")
    parameters: dict[str, list[ScalarValue]] = Field(default_factory=dict, max_length=64)
    constraints: list[str] = Field(default_factory=list, max_length=32)


class JobCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "example": {
                "kernel": "convolution_kernel",
                "problem": {"size_x": 4096, "size_y": 4096},
                "gpu_model": "nvidia-geforce-rtx-3090",
                "budget_trials": 60,
                "parallelism": 4,
            }
        },
    )

    kernel: str = Field(min_length=1, max_length=128)
    problem: dict[str, int | str] = Field(default_factory=dict, max_length=32)
    gpu_model: str = Field(min_length=1, max_length=128, description="GPU model slug or device name")
    objective: Literal["time", "energy", "time+energy"] = Field(
        default="time",
        description="what the search minimizes: kernel time, energy per launch (NVML; cuda workers), or both "
        "(a Pareto front: /v1/best?objective=pareto)",
    )
    strategy: str | None = Field(default=None, description="search strategy; the farm's default if omitted")
    strategy_options: dict[str, Any] = Field(default_factory=dict, max_length=32)
    budget_trials: int | None = Field(default=None, ge=1, description="number of trials to evaluate")
    budget_seconds: float | None = Field(default=None, gt=0, le=30 * 24 * 3600, description="wall-time budget")
    parallelism: int = Field(default=4, ge=1, description="trials in flight at once")
    seed: int | None = Field(default=None, ge=0, le=2**62)
    space: SpaceRestriction | None = None
    profile: ProfileMode = Field(
        default=ProfileMode.ALL,
        description="Nsight Compute profiles: all (every completed trial, in batches), top_k (the k fastest "
        "once the search is done) or none",
    )
    profile_top_k: int = Field(default=5, ge=1, le=100)
    warm_start: bool = Field(
        default=True,
        description="learn from the trials of the same kernel and problem on other GPU models (the job's status "
        "names them); false starts cold",
    )

    @model_validator(mode="after")
    def _needs_a_budget(self) -> JobCreate:
        if self.budget_trials is None and self.budget_seconds is None:
            raise ValueError("give budget_trials and/or budget_seconds")
        return self


class Progress(BaseModel):
    total: int
    queued: int
    running: int
    complete: int
    failed: int
    cancelled: int


class BestSoFar(BaseModel):
    trial_id: int
    config: dict[str, Any]
    config_key: str
    time_ms: float


class JobPublic(BaseModel):
    id: uuid.UUID
    kernel: str
    problem: dict[str, Any]
    gpu_model: str
    objective: str
    strategy: str
    budget_trials: int | None
    budget_seconds: float | None
    parallelism: int
    seed: int
    profile: str
    profile_top_k: int
    warm_start: bool
    state: str
    status_message: str
    owner: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    progress: Progress
    best: BestSoFar | None


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int


class ProfilePublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    requested_at: datetime
    profiled_at: datetime | None
    worker_name: str | None
    metrics: dict[str, Any] | None
    error: str | None
    batch_size: int | None
    wall_seconds: float | None


class TrialPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    seq: int
    config: dict[str, Any]
    config_key: str
    state: str
    attempt: int
    worker_name: str | None
    gpu_uuid: str | None
    time_ms: float | None
    time_p20_ms: float | None
    time_p80_ms: float | None
    times_ms: list[float] | None
    verified: bool
    metrics: dict[str, Any]
    failure_kind: str | None
    failure_message: str | None
    provenance: dict[str, Any]
    profile: ProfilePublic | None = None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class ProblemParamPublic(BaseModel):
    name: str
    kind: str
    choices: list[Any] | None


class KernelPublic(BaseModel):
    name: str
    version: int
    source_hash: str
    description: str
    backends: list[str]
    parameters: dict[str, list[Any]]
    constraints: list[str]
    problem_params: list[ProblemParamPublic]
    default_problem: dict[str, Any]
    valid_configs_default_problem: int
    recorded_gpu_models: list[str]


class WorkerPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    name: str
    hostname: str
    backend: str
    gpu_model: str
    gpu_name: str
    gpu_uuid: str | None
    compute_capability: str | None
    driver_version: str | None
    cuda_version: str | None
    queue: str
    started_at: datetime
    last_heartbeat: datetime
    live: bool = True


class GpuModelPublic(BaseModel):
    gpu_model: str
    gpu_name: str
    live_workers: int
    backends: list[str]


class ParetoPoint(BaseModel):
    config: dict[str, Any]
    config_key: str
    time_ms: float
    energy_mj: float
    trial_id: int


class BestPublic(BaseModel):
    kernel: str
    gpu_model: str = Field(description="the GPU model asked for")
    problem: dict[str, Any] = Field(description="the problem asked for")
    match: Literal["exact", "nearest_problem", "same_architecture"] = Field(
        description="fallback level: exact → same GPU model, nearest problem → same architecture"
    )
    matched_gpu_model: str
    matched_problem: dict[str, Any]
    config: dict[str, Any]
    config_key: str
    time_ms: float
    time_p20_ms: float | None
    time_p80_ms: float | None
    trial_id: int
    job_id: uuid.UUID
    measured_at: datetime | None
    provenance: dict[str, Any]
    metrics: dict[str, Any]
    objective: Literal["time", "energy", "pareto"] = "time"
    energy_mj: float | None = Field(default=None, description="energy per launch (objective energy or pareto)")
    pareto: list[ParetoPoint] | None = Field(
        default=None, description="objective=pareto: the time/energy front, fastest first (this answer is its first)"
    )
