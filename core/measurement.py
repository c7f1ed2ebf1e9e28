"""What a backend returns for one trial: a measurement or a typed failure, plus provenance."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelfarm.core.states import FailureKind


@dataclass(frozen=True)
class TimingStats:
    median_ms: float
    p20_ms: float
    p80_ms: float
    times_ms: tuple[float, ...]

    @classmethod
    def from_times(cls, times_ms: Sequence[float]) -> TimingStats:
        if not times_ms:
            raise ValueError("no repetitions")
        ordered = sorted(float(t) for t in times_ms)
        return cls(
            median_ms=statistics.median(ordered),
            p20_ms=_quantile(ordered, 0.2),
            p80_ms=_quantile(ordered, 0.8),
            times_ms=tuple(float(t) for t in times_ms),
        )


def _quantile(ordered: list[float], q: float) -> float:
    if len(ordered) == 1:
        return ordered[0]
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Measurement:
    """Either ``timing`` (verified run) or ``failure`` is set, never both."""

    timing: TimingStats | None = None
    failure: FailureKind | None = None
    failure_message: str | None = None
    verified: bool = False
    metrics: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.timing is None) == (self.failure is None):
            raise ValueError("a measurement has exactly one of timing and failure")

    @classmethod
    def failed(cls, kind: FailureKind, message: str, **extra: Any) -> Measurement:
        return cls(failure=kind, failure_message=message[:4000], **extra)
