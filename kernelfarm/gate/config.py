"""The CI gate's config file (TOML or JSON): which kernels and problems to check, and how.

baseline = "kernelfarm-baseline.json"   # a `kernelfarm export --format json` file, pinned in the repo
threshold = 0.05                        # a candidate slower than the baseline by more than 5 % fails
timeout = 1800                          # seconds for all measurements together

[[entry]]
kernel = "matmul_fp32"
gpu = "nvidia-h100-80gb-hbm3"
problem = { M = 4096, N = 4096, K = 4096 }
mode = "tune"                           # tune anew (budget below) or "pinned": re-measure `candidate`'s config
budget_trials = 60
seed = 1
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kernelfarm.core.errors import KernelfarmError
from kernelfarm.core.exports import MAX_EXPORT_BYTES, json_format
from kernelfarm.core.exports.model import SCHEMA_NAME, BestExport
from kernelfarm.core.files import read_bounded
from kernelfarm.core.gpu import model_slug
from kernelfarm.core.printable import one_line, quoted, validation_reasons

# The farm's space restriction is {"parameters": {name: [values]}, "constraints": [text]}: three levels.
# Deeper is a mistake, and a space about as deep as json.loads allows made serializing the entry for its
# idempotency key raise (a traceback, and exit 1: "regression").
SPACE_NESTING = 8
# The most of a config the gate reads (core/files.read_bounded): /dev/zero was read until the runner ran
# out of memory. No server limit applies, it being the pipeline's own file: a config is a few hundred bytes
# an entry, so this holds tens of thousands, while parsing and validating one stays within a runner's
# memory. An export's bound is every client's (core/exports MAX_EXPORT_BYTES).
MAX_CONFIG_BYTES = 16 << 20


def _not_a_boolean(value: object) -> object:
    """pydantic takes ``true`` for 1 and ``false`` for 0 where a number is expected: ``threshold = true``
    was a threshold of 100 %, passing any candidate up to twice as slow."""
    if isinstance(value, bool):
        raise ValueError(f"a boolean ({str(value).lower()}) is not a number")
    return value


def _nesting(value: object) -> int:
    """How many levels of tables and lists ``value`` has (iterative: a deep one must not recurse)."""
    deepest, pending = 0, [(value, 0)]
    while pending:
        item, depth = pending.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            pending += [(part, depth + 1) for part in item.values()]
        elif isinstance(item, list):
            pending += [(part, depth + 1) for part in item]
    return deepest


class GateEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kernel: str
    gpu: str
    problem: dict[str, int | str] = Field(default_factory=dict)
    mode: Literal["tune", "pinned"] = "tune"
    budget_trials: int | None = Field(default=None, ge=1)
    budget_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    parallelism: int = Field(default=4, ge=1)
    strategy: str | None = None
    seed: int | None = Field(default=None, ge=0)
    space: dict[str, Any] | None = None
    threshold: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="overrides the file's threshold"
    )

    @field_validator("problem", mode="before")
    @classmethod
    def _dimensions_are_integers_or_text(cls, problem: object) -> object:
        """One reason for a bad dimension: pydantic's own gives one per member of ``int | str``.
        A boolean is refused too, where pydantic would have taken ``true`` for 1."""
        if not isinstance(problem, dict):
            return problem
        for name, value in problem.items():
            integral = isinstance(value, float) and value.is_integer()  # 4096.0 from a JSON writer
            if isinstance(value, bool) or not (isinstance(value, int | str) or integral):
                raise ValueError(f"dimension {name!r} is {quoted(value)}: a dimension is an integer or text")
        return problem

    _numbers_are_not_booleans = field_validator(
        "budget_trials", "budget_seconds", "parallelism", "seed", "threshold", mode="before"
    )(_not_a_boolean)

    @field_validator("gpu")
    @classmethod
    def _gpu_names_a_model(cls, gpu: str) -> str:
        """A name without a letter or digit has no GPU model slug: model_slug raised a traceback (exit 1,
        "regression") when the entry was checked. Its ValueError says why."""
        model_slug(gpu)
        return gpu

    @field_validator("space", mode="before")
    @classmethod
    def _space_is_shallow(cls, space: object) -> object:
        if _nesting(space) > SPACE_NESTING:
            raise ValueError(f"nested deeper than {SPACE_NESTING} levels (a space is parameters and constraints)")
        return space

    @model_validator(mode="after")
    def _tune_needs_a_budget(self) -> GateEntry:
        if self.mode == "tune" and self.budget_trials is None and self.budget_seconds is None:
            raise ValueError(
                f"entry {self.kernel!r} on {self.gpu!r}: mode 'tune' needs budget_trials or budget_seconds"
            )
        return self

    @property
    def name(self) -> str:
        problem = ",".join(f"{k}={v}" for k, v in self.problem.items()) or "default problem"
        return f"{self.kernel} [{problem}] on {self.gpu}"


class GateConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    baseline: Path
    candidate: Path | None = Field(default=None, description="export whose configs 'pinned' entries re-measure")
    # Finite, or a threshold of inf would pass any regression and a timeout of inf wait forever.
    threshold: float = Field(default=0.05, ge=0, allow_inf_nan=False)
    timeout: float = Field(default=1800, gt=0, allow_inf_nan=False)
    entry: list[GateEntry] = Field(min_length=1)

    _numbers_are_not_booleans = field_validator("threshold", "timeout", mode="before")(_not_a_boolean)


class ConfigError(ValueError):
    """The config file or a file it names cannot be used; the message says why, on one line (a
    value or file name quoted in it may hold a line break: it is shown escaped)."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


def load_config(path: Path) -> GateConfig:
    try:
        # TOML is UTF-8 whatever the runner's locale says; commands/ci.py words a UnicodeDecodeError
        text = read_bounded(path, MAX_CONFIG_BYTES).decode("utf-8")
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
        config = GateConfig.model_validate(data)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path} is not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {exc}") from None
    except ValidationError as exc:
        raise ConfigError(f"{path}: {_file_reasons(exc)}") from None
    # Files the config names are relative to the config file, as a pipeline checks them in together.
    updates: dict[str, Path] = {"baseline": path.parent / config.baseline}
    if config.candidate is not None:
        updates["candidate"] = path.parent / config.candidate
    if any(e.mode == "pinned" for e in config.entry) and config.candidate is None:
        raise ConfigError(f"{path}: 'pinned' entries re-measure the configs of `candidate`: name that export")
    return config.model_copy(update=updates)


def load_export(path: Path) -> BestExport:
    try:
        # The farm writes its exports as UTF-8 JSON (see above).
        text = read_bounded(path, MAX_EXPORT_BYTES).decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the export {path}: {exc.strerror}") from None
    except ValueError as exc:  # a name no OS call can take: a NUL, a lone surrogate (a JSON config's)
        raise ConfigError(f"cannot read the export {path}: {exc}") from None
    try:
        # Validated here first for a one-line reason; json_format.read's quotes pydantic's, many lines long.
        BestExport.model_validate_json(text)
        return json_format.read(text)
    except ValidationError as exc:
        raise ConfigError(f"{path}: not a {SCHEMA_NAME} file: {_file_reasons(exc)}") from None
    except KernelfarmError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _file_reasons(exc: ValidationError) -> str:
    """Why a config or an export was refused, on one line, quoting no more of the file than a field's
    value. Text that is not JSON, or a document that is not a table, is said to be so without quoting it:
    pydantic's input there is the whole file, and a config naming ``/proc/self/environ`` as its baseline
    had the start of the process environment (tokens, passwords) printed in the pipeline's log."""
    errors = exc.errors(include_url=False)
    whole = [error for error in errors if error["type"] == "json_invalid" or not error["loc"]]
    if whole:
        message = whole[0]["msg"]
        return f"the file: {one_line(message[:1].lower() + message[1:])}"
    return validation_reasons(exc, "the file")
