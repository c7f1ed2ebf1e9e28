"""Typed results of :class:`kernelfarm.sdk.Client`. Unknown fields a newer farm sends are ignored.

The API's schemas (api/schemas.py) are the source of truth; these are the client's reading of them, kept
apart on purpose (tolerant of newer and older farms, frozen, and the API may not import the client).
tests/sdk/test_results_match_api.py fails when a field here is not one the API sends, or not as typed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from kernelfarm.core.states import JobState

FINISHED_STATES = frozenset(state.value for state in JobState if state.finished)


class _Result(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Progress(_Result):
    total: int
    queued: int
    running: int
    complete: int
    failed: int
    cancelled: int


class BestSoFar(_Result):
    """The job's best trial under its objective; ``energy_mj`` where it was measured (an energy job's
    best always has it)."""

    trial_id: int
    config: dict[str, Any]
    config_key: str
    time_ms: float
    energy_mj: float | None = None


class WarmStartPrior(_Result):
    """The trials of other GPU models a warm job learned from: ``state`` is "in_use", "held_back",
    "dropped" or "none" (no other GPU model had tuned the kernel and problem)."""

    trials: int
    sources: list[str]
    state: str


class Job(_Result):
    id: str
    kernel: str
    problem: dict[str, Any]
    gpu_model: str
    strategy: str
    budget_trials: int | None
    budget_seconds: float | None
    objective: str = "time"  # what the search minimizes: "time", "energy" or "time+energy"
    strategy_options: dict[str, Any] = {}
    warm_start: bool = True
    warm_start_prior: WarmStartPrior | None = None  # None: warm start off, not stepped yet, or an older farm
    state: str
    status_message: str
    owner: str
    created_at: datetime
    finished_at: datetime | None
    progress: Progress
    best: BestSoFar | None

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES


class Trial(_Result):
    id: int
    seq: int
    config: dict[str, Any]
    config_key: str
    state: str
    time_ms: float | None
    time_p20_ms: float | None
    time_p80_ms: float | None
    verified: bool
    failure_kind: str | None
    provenance: dict[str, Any]


class ParetoPoint(_Result):
    """A config of the time/energy front (``BestConfig.pareto``): no other is both faster and more frugal."""

    config: dict[str, Any]
    config_key: str
    time_ms: float
    energy_mj: float
    trial_id: int


class BestConfig(_Result):
    """The answer of ``GET /v1/best``: ``match`` says which fallback level answered."""

    kernel: str
    gpu_model: str
    problem: dict[str, Any]
    match: str
    matched_gpu_model: str
    matched_problem: dict[str, Any]
    config: dict[str, Any]
    config_key: str
    time_ms: float
    time_p20_ms: float | None
    time_p80_ms: float | None
    trial_id: int
    job_id: str
    provenance: dict[str, Any]
    objective: str = "time"  # "time", "energy" or "pareto", as asked
    energy_mj: float | None = None  # energy per launch, for objective energy or pareto
    pareto: list[ParetoPoint] | None = None  # objective pareto: the time/energy front, fastest first


class Kernel(_Result):
    name: str
    version: int
    source_hash: str
    description: str
    backends: list[str]
    parameters: dict[str, list[Any]]
    default_problem: dict[str, Any]
    recorded_gpu_models: list[str]
