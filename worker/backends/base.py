"""The backend contract: who am I (device identity) and measure one config.

A backend never raises for a bad config: compile errors, launch failures, hangs, crashes and wrong
results come back as a :class:`~core.measurement.Measurement` with a failure kind. It raises only
for infrastructure problems (the device is gone), which the task layer retries.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kernelfarm.core.measurement import Measurement

# Called during a long measurement; False when the trial's lease was lost (stop early).
KeepAlive = Callable[[], bool] | None


@dataclass(frozen=True)
class DeviceIdentity:
    gpu_name: str
    gpu_model: str
    gpu_uuid: str | None
    compute_capability: str | None
    driver_version: str | None
    cuda_version: str | None
    extra: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class MeasureRequest:
    kernel_name: str
    problem: Mapping[str, Any]
    config: Mapping[str, Any]
    profile: bool  # collect an Nsight Compute profile for this trial
    seed: int


@dataclass(frozen=True)
class ProfileOutcome:
    """The profile of one request: hardware metrics, or why there are none."""

    metrics: Mapping[str, Any] | None
    error: str | None = None


class Backend(ABC):
    name: str

    @abstractmethod
    def identity(self) -> DeviceIdentity:
        """The device this backend measures on (for a replay backend: the recorded device)."""

    @abstractmethod
    def measure(self, request: MeasureRequest, keep_alive: Callable[[], bool] | None = None) -> Measurement:
        """Measure one config.

        Args:
            request: what to measure.
            keep_alive: called periodically during long measurements; returns False when the lease
                was lost, in which case the backend may stop early (its result will be discarded).

        Returns:
            A Measurement: timing and metrics, or a typed failure. Provenance always filled.
        """

    def measure_stream(self, requests: Iterable[tuple[MeasureRequest, KeepAlive]]) -> Iterator[Measurement]:
        """Measure (request, lease check) pairs in order, yielding each result as soon as it is known.

        The next pair is pulled only once the current request is under way, so a caller that
        produces pairs lazily (claiming each trial from the database) does that work while the
        device measures. A backend that can start on the next request while the caller stores a
        result overrides this (the cuda backend queues it on its measuring child)."""
        for request, keep_alive in requests:
            yield self.measure(request, keep_alive)

    def profile(self, requests: list[MeasureRequest]) -> list[ProfileOutcome]:
        """Profile already-measured configs, ideally all in one profiler process.

        Returns:
            One outcome per request, in order. Never raises for a profiler problem.
        """
        return [ProfileOutcome(None, f"the {self.name} backend has no profiler") for _ in requests]

    def warm_up(self) -> None:  # noqa: B027 - optional hook
        """Optional: pay one-time start-up costs (device context, libraries, calibration) now, when
        the worker starts, rather than in the first trial of a job."""

    def prepare(self, requests: list[MeasureRequest]) -> None:  # noqa: B027 - optional hook
        """Optional: start work ahead for upcoming requests (e.g. compile them in parallel)."""

    def ready(self, request: MeasureRequest) -> bool:
        """Would ``measure(request)`` start on the device at once, with nothing left to compile?

        The runner measures ready trials of the same job while an unready one compiles. A backend
        that prepares nothing is always ready."""
        return True

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the device."""
