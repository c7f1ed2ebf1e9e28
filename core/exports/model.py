"""The data every export is written from, and the farm's own versioned JSON schema of it.

``BestExport`` is also the format the runtime lookup reads offline (kernelfarm/sdk/lookup.py):
change it only by adding optional fields, or bump :data:`SCHEMA_VERSION`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = "1.0"
SCHEMA_NAME: Literal["kernelfarm.best-export"] = "kernelfarm.best-export"


class Toolchain(BaseModel):
    """What the measurement depended on besides the config (None: not recorded by that backend)."""

    model_config = ConfigDict(extra="allow")
    backend: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    nvrtc_version: str | None = None
    triton_version: str | None = None

    @classmethod
    def from_provenance(cls, provenance: Mapping[str, Any]) -> Toolchain:
        """The toolchain a measurement recorded in its provenance (``worker/cuda/provenance.py``)."""
        return cls(
            backend=provenance.get("backend"),
            driver_version=provenance.get("driver_version"),
            # the worker records the driver's CUDA version; older exports called it cuda_version
            cuda_version=provenance.get("cuda_driver_version") or provenance.get("cuda_version"),
            nvrtc_version=provenance.get("nvrtc_version"),
            triton_version=provenance.get("triton_version"),
        )


class BestEntry(BaseModel):
    gpu_model: str
    gpu_name: str | None = Field(default=None, description="device name as the driver reports it")
    compute_capability: str | None = None
    problem: dict[str, Any]
    problem_key: str
    config: dict[str, Any]
    config_key: str
    time_ms: float
    time_p20_ms: float | None = None
    time_p80_ms: float | None = None
    toolchain: Toolchain = Field(default_factory=Toolchain)
    trial_id: int
    job_id: str
    measured_at: datetime | None = None
    provenance: dict[str, Any] = Field(default_factory=dict, description="the trial's full provenance record")


class BestExport(BaseModel):
    """The best verified config of one kernel per (GPU model, problem) the farm has measured."""

    schema_name: Literal["kernelfarm.best-export"] = SCHEMA_NAME
    schema_version: str = SCHEMA_VERSION
    kernel: str
    kernel_version: int
    source_hash: str
    parameters: list[str] = Field(description="tunable parameter names in the kernel's order")
    problem_params: list[str] = Field(description="problem dimension names in the kernel's order")
    default_problem: dict[str, Any] = Field(default_factory=dict)
    default_problem_key: str | None = Field(
        default=None, description="the default problem's key as entries' problem_key spell it (None: older exports)"
    )
    problem_key_defaults: dict[str, Any] = Field(
        default_factory=dict,
        description="problem dimensions added to the kernel later: a problem without one reads as this value",
    )
    generated_at: datetime
    entries: list[BestEntry]


class TrialRow(BaseModel):
    """One trial of a job, as the trial formats need it."""

    seq: int
    config: dict[str, Any]
    config_key: str
    state: str
    time_ms: float | None = None
    time_p20_ms: float | None = None
    time_p80_ms: float | None = None
    times_ms: list[float] | None = None
    verified: bool = False
    failure_kind: str | None = None
    compile_seconds: float | None = None
    finished_at: datetime | None = None


class TrialsExport(BaseModel):
    kernel: str
    job_id: str
    gpu_model: str
    gpu_name: str | None = None
    problem: dict[str, Any]
    parameters: dict[str, list[Any]] = Field(description="the kernel's parameter values, in order")
    trials: list[TrialRow]
