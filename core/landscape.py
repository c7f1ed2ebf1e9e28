"""Kernel Tuner cache files ("landscapes"): exhaustive or sampled recordings of a search space.

Format: ``{device_name, kernel_name, problem_size, tune_params_keys, tune_params, cache}`` where
``cache`` maps the canonical key to an entry whose ``time`` is the mean of ``times`` in ms, or a
failure marker. Files may be gzip-compressed and may be unterminated (Kernel Tuner appends entries
as it goes): a trailing comma is stripped and the braces closed.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernelfarm.core.recording_file import check_format, read_json_tolerant, recorded_device
from kernelfarm.core.space import Parameter, SearchSpace
from kernelfarm.core.states import FailureKind

# The file's JSON alone (no numpy) is read in core/recording_file.py; importable from here as before.
__all__ = ["Landscape", "Recording", "check_format", "load_landscape", "read_json_tolerant", "recorded_device"]

_FAILURE_MARKERS = {
    "CompilationFailedConfig": FailureKind.COMPILE,
    "RuntimeFailedConfig": FailureKind.LAUNCH,
    "InvalidConfig": FailureKind.CONSTRAINT,
    "ErrorConfig": FailureKind.CRASH,
}


@dataclass(frozen=True)
class Recording:
    """One recorded configuration: a time in ms with its repetitions, or a failure."""

    time_ms: float | None  # median of the repetitions: what the farm reports
    mean_ms: float | None  # Kernel Tuner's "time" (the mean): what its strategy benchmarks compare
    times_ms: tuple[float, ...]
    failure: FailureKind | None
    failure_message: str | None


@dataclass(frozen=True)
class Landscape:
    path: Path
    device_name: str
    kernel_name: str
    problem_size: tuple[int, ...]
    space: SearchSpace
    entries: dict[str, Recording]

    @property
    def valid_keys(self) -> list[str]:
        return [k for k, r in self.entries.items() if r.failure is None]

    @property
    def optimum_ms(self) -> float:
        return min(r.time_ms for r in self.entries.values() if r.time_ms is not None)

    def without_failures(self) -> Landscape:
        kept = {k: r for k, r in self.entries.items() if r.failure is None}
        space = SearchSpace(self.space.parameters, allowed_keys=frozenset(kept))
        return Landscape(self.path, self.device_name, self.kernel_name, self.problem_size, space, kept)


def load_landscape(path: Path) -> Landscape:
    """Read a Kernel Tuner cache file (plain or .gz, terminated or not).

    Raises:
        InvalidInput: when the file lacks the fields of the format.
    """
    # One parse per file and process, whatever the spelling of its path: a replay worker's start-up read
    # its recording twice (the catalogue reaches it through the package's kernels link, the CLI resolved),
    # and the catalogue's 18 recordings overflowed a cache of 16.
    return _load_landscape(Path(path).resolve())


@lru_cache(maxsize=128)
def _load_landscape(path: Path) -> Landscape:
    data = read_json_tolerant(path)
    check_format(path, data)
    keys = list(data["tune_params_keys"])
    tune_params = data["tune_params"]
    cache = data["cache"]
    parameters = tuple(Parameter(name, tuple(tune_params[name])) for name in keys)
    entries = {key: _recording(entry) for key, entry in cache.items()}
    size = data.get("problem_size", [])
    problem = tuple(int(v) for v in (size if isinstance(size, list) else [size]))
    space = SearchSpace(parameters, allowed_keys=frozenset(entries))
    return Landscape(
        path=Path(path),
        device_name=recorded_device(data),
        kernel_name=str(data.get("kernel_name", Path(path).name.split(".")[0])),
        problem_size=problem,
        space=space,
        entries=entries,
    )


def is_a_time(value: float) -> bool:
    """A time a measurement can take: finite and above zero."""
    return math.isfinite(value) and value > 0


def _recording(entry: dict[str, Any]) -> Recording:
    if "__error__" in entry:
        return Recording(None, None, (), FailureKind.CRASH, str(entry["__error__"]))
    value = entry.get("time")
    if isinstance(value, str):
        return Recording(None, None, (), _FAILURE_MARKERS.get(value, FailureKind.CRASH), value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return Recording(None, None, (), FailureKind.CRASH, "no time recorded")
    if not is_a_time(value):
        # Served as measured, -1 or 0 ms became a farm's best config, and NaN one that no result row
        # could store (PostgreSQL's JSON has no NaN): the trial ended as "worker lost" three times.
        return Recording(None, None, (), FailureKind.CRASH, f"recorded time {value!r} ms is not a positive number")
    times = tuple(float(t) for t in entry.get("times", []) if isinstance(t, int | float) and is_a_time(t))
    median = statistics.median(times) if times else float(value)
    return Recording(float(median), float(value), times or (float(value),), None, None)
