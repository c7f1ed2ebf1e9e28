"""What the CLI reads of the API's answers: for each answer, the fields a command prints or follows, with
their types. kernelfarm.client.Client checks every answer against one of these models, so an answer
without a field this CLI needs (another kernelfarm version, another server at the address) is one line
naming the field, instead of a KeyError or TypeError in the middle of printing a table.

The models are checked, not returned: the client hands the answer on as the server sent it (``--json``
prints every field, the ones this CLI does not know too). That is why they are strict: a value that passes
is of the type the code then formats ("0.5" is no float for ``f"{time_ms:.4f}"``, 1 is no bool).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, model_validator

from kernelfarm.core.printable import listed, validation_reasons

# The most fields one error names: a page of 500 broken jobs is 500 times the same few fields.
NAMED_FIELDS = 5


class _Read(BaseModel):
    """Fields a command reads; any other field of the answer is left alone."""

    model_config = ConfigDict(strict=True, extra="ignore")


class Progress(_Read):
    total: int
    running: int
    complete: int
    failed: int


class BestSoFar(_Read):
    config: dict[str, Any]
    time_ms: float
    energy_mj: float | None = None


class WarmStartPrior(_Read):
    state: str
    sources: list[str]
    trials: int


class Job(_Read):
    """An answer of POST /v1/jobs, GET /v1/jobs/{id} and POST /v1/jobs/{id}/cancel."""

    id: str
    kernel: str
    problem: dict[str, Any]
    gpu_model: str
    state: str
    status_message: str
    budget_trials: int | None
    progress: Progress
    best: BestSoFar | None
    warm_start_prior: WarmStartPrior | None = None


class JobPage(_Read):
    items: list[Job]
    total: int


class Trial(_Read):
    seq: int
    state: str
    config: dict[str, Any]
    time_ms: float | None
    time_p20_ms: float | None
    time_p80_ms: float | None

    @model_validator(mode="after")
    def _complete_trials_have_times(self) -> Trial:
        # `job` and `tune` print the times of complete trials.
        if self.state == "complete" and None in (self.time_ms, self.time_p20_ms, self.time_p80_ms):
            raise ValueError("a complete trial without its times (time_ms, time_p20_ms, time_p80_ms)")
        return self


class TrialPage(_Read):
    items: list[Trial]
    total: int


class ParetoPoint(_Read):
    config_key: str
    time_ms: float
    energy_mj: float
    trial_id: int


class Best(_Read):
    """GET /v1/best."""

    match: str
    matched_gpu_model: str
    matched_problem: dict[str, Any]
    config: dict[str, Any]
    time_ms: float
    energy_mj: float | None = None
    trial_id: int
    job_id: str
    provenance: dict[str, Any]
    pareto: list[ParetoPoint] | None = None


class Worker(_Read):
    name: str
    backend: str
    gpu_model: str
    gpu_name: str
    compute_capability: str | None
    driver_version: str | None
    last_heartbeat: str
    live: bool


class ProblemParam(_Read):
    name: str


class Kernel(_Read):
    """GET /v1/kernels (each) and GET /v1/kernels/{name}: what `kernels`, `kernel list` and `kernel show` print."""

    name: str
    version: int
    source_hash: str
    description: str
    backends: list[str]
    parameters: dict[str, list[Any]]
    constraints: list[str]
    problem_params: list[ProblemParam]
    default_problem: dict[str, Any]
    valid_configs_default_problem: int
    recorded_gpu_models: list[str]
    origin: str = "catalogue"
    requires: list[str] = []


class KernelVersion(_Read):
    """Each of GET /v1/kernels/{name}/versions, and the answer of an upload (POST /v1/kernels)."""

    name: str
    version: int
    content_hash: str
    source_hash: str
    owner: str
    created_at: str
    files: list[str]
    recording: str | None
    created: bool = False


JOB: TypeAdapter[Any] = TypeAdapter(Job)
JOB_PAGE: TypeAdapter[Any] = TypeAdapter(JobPage)
TRIAL_PAGE: TypeAdapter[Any] = TypeAdapter(TrialPage)
BEST: TypeAdapter[Any] = TypeAdapter(Best)
WORKERS: TypeAdapter[Any] = TypeAdapter(list[Worker])
KERNEL: TypeAdapter[Any] = TypeAdapter(Kernel)
KERNELS: TypeAdapter[Any] = TypeAdapter(list[Kernel])
KERNEL_VERSION: TypeAdapter[Any] = TypeAdapter(KernelVersion)
KERNEL_VERSIONS: TypeAdapter[Any] = TypeAdapter(list[KernelVersion])


def unreadable(exc: ValidationError) -> str:
    """What an answer lacks, on one line, to follow "the API answered GET /v1/jobs ...": "without the field
    'items[0].best'" where fields are missing, else each field and why. A field missing from every item of
    a list is named once (its first item's)."""
    errors = exc.errors(include_url=False)
    if all(error["type"] == "missing" for error in errors):
        fields: dict[str, str] = {}  # the location without list indices -> as shown
        for error in errors:
            shown = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"]).lstrip(".")
            fields.setdefault(re.sub(r"\[\d+\]", "[]", shown), shown)
        noun = "field" if len(fields) == 1 else "fields"
        return f"without the {noun} {listed([repr(f) for f in fields.values()], NAMED_FIELDS, ', ')}"
    return f"with fields this CLI cannot read ({validation_reasons(exc, 'the answer', NAMED_FIELDS)})"
