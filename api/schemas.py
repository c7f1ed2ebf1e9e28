"""HTTP schemas: one per direction (Create = request body, Public = response)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.objectives import OBJECTIVES, check_objective
from kernelfarm.core.states import ProfileMode
from kernelfarm.core.store.text import invisible_character, unstorable
from kernelfarm.core.store.tokens import check_token_name

# Strict: "5" stays a string and true is no 1 (lax coercion created jobs from "5", true and "yes").
ScalarValue = StrictInt | StrictFloat | StrictStr
T = TypeVar("T")


class ValidationIssue(BaseModel):
    """One reason a request was refused (the items of a 422's ``detail``)."""

    type: str
    loc: list[str | int]
    msg: str
    input: Any = None
    ctx: dict[str, Any] | None = None


class ErrorPublic(BaseModel):
    """Every error answer (4xx and 503): a sentence, or for request validation the list of issues."""

    detail: str | list[ValidationIssue]


class ReadinessPublic(BaseModel):
    """``/ready``: ``status`` is "ready" or "not ready"; one entry per dependency, "ok" or why not."""

    model_config = ConfigDict(extra="allow")
    status: Literal["ready", "not ready"]
    database: str
    broker: str


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
    kernel_version: int | None = Field(
        default=None,
        ge=1,
        le=2**31 - 1,
        strict=True,
        description="an uploaded kernel's version to pin; default: its latest",
    )
    problem: dict[str, StrictInt | StrictStr] = Field(default_factory=dict, max_length=32)
    gpu_model: str = Field(min_length=1, max_length=128, description="GPU model slug or device name")
    # The objectives and the refusal's reason come from core/objectives.py (the worker asks it too).
    objective: Annotated[StrictStr, AfterValidator(check_objective)] = Field(
        default="time",
        max_length=32,
        description="what the search minimizes: kernel time, energy per launch (NVML; cuda workers), or both "
        "(a Pareto front: /v1/best?objective=pareto)",
        json_schema_extra={"enum": list(OBJECTIVES)},
    )
    strategy: str | None = Field(
        default=None, min_length=1, max_length=64, description="search strategy; the farm's default if omitted"
    )
    strategy_options: dict[str, Any] = Field(default_factory=dict, max_length=32)
    # strict: a number must be sent as a JSON number and a flag as true/false (see ScalarValue).
    budget_trials: int | None = Field(default=None, ge=1, strict=True, description="number of trials to evaluate")
    budget_seconds: float | None = Field(
        default=None, gt=0, le=30 * 24 * 3600, strict=True, allow_inf_nan=False, description="wall-time budget"
    )
    parallelism: int = Field(default=4, ge=1, strict=True, description="trials in flight at once")
    seed: int | None = Field(default=None, ge=0, le=2**62, strict=True)
    space: SpaceRestriction | None = None
    profile: ProfileMode = Field(
        default=ProfileMode.ALL,
        description="Nsight Compute profiles: all (every completed trial, in batches), top_k (the k fastest "
        "once the search is done) or none",
    )
    profile_top_k: int = Field(default=5, ge=1, le=100, strict=True)
    warm_start: bool = Field(
        default=True,
        strict=True,
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
    """The job's best trial under its objective (a trial without an energy reading never is an
    energy job's best)."""

    trial_id: int
    config: dict[str, Any]
    config_key: str
    time_ms: float
    energy_mj: float | None = Field(default=None, description="energy per launch, where it was measured")


class WarmStartPrior(BaseModel):
    """The prior a warm job's last step used (the job's status says it while the job runs; this stays
    when it ends)."""

    trials: int = Field(description="trials of the same kernel and problem on other GPU models")
    sources: list[str] = Field(description="their GPU models")
    state: Literal["in_use", "held_back", "dropped", "none"] = Field(
        description="in_use; held_back: not admitted yet, the job runs as a cold one until its own measurements "
        "rank configs as the prior does; dropped: they did not (the job went on cold); none: no other GPU model "
        "had tuned this kernel and problem"
    )


class JobPublic(BaseModel):
    id: uuid.UUID
    kernel: str
    kernel_version: int = Field(default=1, description="the kernel version the job pinned")
    problem: dict[str, Any]
    gpu_model: str
    objective: str
    strategy: str
    strategy_options: dict[str, Any] = Field(
        default_factory=dict, description="the options the job's strategy runs with, as submitted"
    )
    budget_trials: int | None
    budget_seconds: float | None
    parallelism: int
    seed: int
    profile: str
    profile_top_k: int
    warm_start: bool
    warm_start_prior: WarmStartPrior | None = Field(
        default=None, description="null for a job with warm_start false, and before its first step"
    )
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
    origin: str = Field(default="catalogue", description="catalogue, plugin or upload")
    requires: list[str] = Field(default_factory=list, description="what a worker needs to measure it")


class KernelVersionPublic(BaseModel):
    """One uploaded version of a kernel: immutable, identified by the hash of its content."""

    name: str
    version: int
    content_hash: str
    source_hash: str = Field(description="the hash trials of this version record (kernel provenance)")
    owner: str
    created_at: datetime
    files: list[str]
    recording: str | None = Field(description="the Kernel Tuner cache file uploaded with it, if any")
    manifest: dict[str, Any]
    created: bool = Field(default=False, description="in an upload's answer: False when this content was stored before")


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
    capabilities: list[str] = Field(default_factory=list, description="kernel plugins and opt-ins it has")
    memory_bytes: int | None = Field(
        None, description="its GPU's total memory (NVML); jobs whose problem needs more are refused"
    )
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


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"example": {"name": "ci", "scopes": ["submit"]}})

    name: str = Field(
        min_length=1, max_length=128, pattern=r"^[^\x00-\x1f]+$",
        description="who uses it; jobs submitted with it are owned by this name (printable, no invisible "
        "characters, no white space at either end)",
    )  # fmt: skip
    scopes: list[Literal["read", "submit", "kernels", "admin"]] = Field(min_length=1, max_length=4)

    @field_validator("name")
    @classmethod
    def _visible_name(cls, name: str) -> str:
        try:
            return check_token_name(name)
        except InvalidInput as exc:
            raise ValueError(str(exc)) from None


class TokenPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    scopes: list[str]
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class TokenCreated(TokenPublic):
    token: str = Field(description="the token itself, shown only in this answer")


MAX_STORED_DEPTH = 64  # a profile-model report is a few levels deep; pydantic stops serializing at 255


def _json_is_storable(value: Any, path: str = "report") -> None:
    """PostgreSQL's JSONB refuses NUL characters and JSON has no NaN or Infinity: say where, as a 422,
    instead of failing at the insert. Nesting is bounded too: a report stored 300 levels deep could
    never be read back (pydantic refuses to serialize it: every GET was a 500)."""
    reason = unstorable(value, path, MAX_STORED_DEPTH)
    if reason:
        raise ValueError(reason)


class ModelProfileCreate(BaseModel):
    """A report of ``kernelfarm profile-model`` (its JSON output), stored as it is."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model: str = Field(min_length=1, max_length=256)
    device_name: str = Field(min_length=1, max_length=128)
    dtype: Literal["bfloat16", "float16", "float32"]
    batch: int = Field(ge=1, le=1 << 20, strict=True)
    seq: int = Field(ge=1, le=1 << 20, strict=True)
    latency_ms: float = Field(gt=0, le=1e9, strict=True)  # a number: "3" or true is refused
    report: dict[str, Any]

    @model_validator(mode="after")
    def _storable(self) -> ModelProfileCreate:
        for name in ("model", "device_name"):
            _json_is_storable(getattr(self, name), name)
            if (invisible := invisible_character(getattr(self, name))) is not None:  # they title its page
                raise ValueError(f"{name} may not contain {invisible} (an invisible or control character)")
        _json_is_storable(self.report)
        return self


class ModelProfileSummary(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    model: str
    device_name: str
    gpu_model: str
    dtype: str
    batch: int
    seq: int
    latency_ms: float
    owner: str
    created_at: datetime


class ModelProfilePublic(ModelProfileSummary):
    report: dict[str, Any]
