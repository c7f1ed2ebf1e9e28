"""The backend contract: who am I (device identity), and measure configs of kernels.

A backend never raises for a bad config: compile errors, launch failures, hangs, crashes, wrong
results, an unknown kernel or a config outside the valid space come back as a
:class:`~kernelfarm.core.measurement.Measurement` with a failure kind. It raises only for
infrastructure problems (the device is gone), which the task layer retries.

Implementations: ``cuda`` and ``triton`` (a real GPU, ``backends/cuda.py``, ``backends/triton.py``, both
``backends/gpu.py``), ``replay`` (recorded Kernel Tuner
measurements, ``backends/replay.py``), ``fake`` (synthetic timings on the CPU, ``backends/fake.py``).
Every one passes the contract suite in ``tests/worker/test_backend_contract.py``. A GPU backend
measures in the shared measuring child (``worker/measuring/``) and supplies its own compile step
and kernel loader (``backends/gpu.py``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kernelfarm.core.measurement import Measurement
from kernelfarm.kernels.spec import KernelSpec, format_bytes

# Called during a long measurement; False when the trial's lease was lost (stop early).
KeepAlive = Callable[[], bool] | None


@dataclass(frozen=True)
class DeviceIdentity:
    """The device a backend measures on; a worker registers with it and serves the queue of
    ``gpu_model`` (always ``core.gpu.model_slug(gpu_name)``)."""

    gpu_name: str
    gpu_model: str
    gpu_uuid: str | None
    compute_capability: str | None
    driver_version: str | None
    cuda_version: str | None
    extra: Mapping[str, Any] | None = None
    # Total device memory (NVML's): the worker registers it, and the API refuses jobs whose problem
    # needs more (KernelSpec.device_bytes). None: not known (a replay backend).
    memory_bytes: int | None = None


@dataclass(frozen=True)
class MeasureRequest:
    """One config of one kernel for one problem, to be measured."""

    kernel_name: str
    problem: Mapping[str, Any]
    config: Mapping[str, Any]
    profile: bool  # collect an Nsight Compute profile for this trial
    seed: int
    kernel_version: int | None = None  # the version the job pinned (None: the kernel as installed here)
    # Meter its energy per launch: only where the job's objective needs it (core/objectives.py), as
    # the meter costs a trial about a second of GPU time.
    energy: bool = False


@dataclass(frozen=True)
class ProfileOutcome:
    """The profile of one request: hardware metrics, or why there are none."""

    metrics: Mapping[str, Any] | None
    error: str | None = None


def device_memory_refusal(spec: KernelSpec, problem: Mapping[str, Any], memory_bytes: int) -> str | None:
    """Why a worker whose GPU has ``memory_bytes`` does not measure ``problem`` of ``spec`` (it cannot
    fit), or None. Every backend that knows its GPU's memory refuses with these words: the GPU backends'
    staging (worker/measuring/staging.py), the fake backend given ``memory_bytes``."""
    return spec.memory_refusal(problem, memory_bytes, f"the {format_bytes(memory_bytes)} of this worker's GPU")


class Backend(ABC):
    """Measures kernel configs on one device. One instance per worker process.

    Lifecycle: construct (cheap: no device work beyond identifying it) → :meth:`warm_up` once,
    before the worker registers → any number of :meth:`prepare` / :meth:`ready` /
    :meth:`measure` / :meth:`measure_stream` / :meth:`profile` calls, from one thread → :meth:`close`.
    """

    #: the backend's name: recorded as the worker's backend and in every measurement's provenance
    name: str

    @abstractmethod
    def identity(self) -> DeviceIdentity:
        """The device this backend measures on (for a replay backend: the recorded device).

        Returns:
            Its identity; ``gpu_model`` is the slug of ``gpu_name``.

        Raises:
            Exception: the device cannot be queried (infrastructure).
        """

    @abstractmethod
    def measure(self, request: MeasureRequest, keep_alive: Callable[[], bool] | None = None) -> Measurement:
        """Measure one config.

        Args:
            request: what to measure.
            keep_alive: called periodically during long measurements; returns False when the lease
                was lost, in which case the backend may stop early (its result will be discarded).

        Returns:
            A Measurement: a verified timing with metrics, or a typed failure (also for an unknown
            kernel or a config outside its valid space: CONSTRAINT). Provenance always filled,
            with ``provenance["backend"] == self.name``.

        Raises:
            Exception: only for infrastructure problems (the device is gone), never for the config.
        """

    def measure_stream(self, requests: Iterable[tuple[MeasureRequest, KeepAlive]]) -> Iterator[Measurement]:
        """Measure (request, lease check) pairs in order, yielding each result as soon as it is known.

        The next pair is pulled only once the current request is under way, so a caller that
        produces pairs lazily (claiming each trial from the database) does that work while the
        device measures. A backend that can start on the next request while the caller stores a
        result overrides this (the cuda backend queues it on its measuring child).

        Args:
            requests: (request, keep_alive) pairs, as for :meth:`measure`; may be a lazy iterator.

        Returns:
            An iterator of exactly one Measurement per request, in the requests' order.

        Raises:
            Exception: as :meth:`measure`; a bad config is a failed Measurement in the stream.
        """
        for request, keep_alive in requests:
            yield self.measure(request, keep_alive)

    def profile(self, requests: list[MeasureRequest]) -> list[ProfileOutcome]:
        """Profile already-measured configs, ideally all in one profiler process.

        Args:
            requests: configs measured (and verified) before.

        Returns:
            One outcome per request, in order. Never raises for a profiler problem or a bad config:
            the outcome's ``error`` says why it has no metrics.
        """
        return [ProfileOutcome(None, f"the {self.name} backend has no profiler") for _ in requests]

    def warm_up(self) -> None:  # noqa: B027 - optional hook
        """Pay one-time start-up costs (device context, libraries, calibration) now, when the worker
        starts, rather than in the first trial of a job. Optional; safe to call more than once.

        Raises:
            Exception: the warm-up failed; the worker logs it and carries on (the first trial then
                pays instead).
        """

    def prepare(self, requests: list[MeasureRequest]) -> None:  # noqa: B027 - optional hook
        """Start work ahead for upcoming requests (e.g. compile them in parallel). Optional; never
        raises for a bad config (it is reported when measured)."""

    def ready(self, request: MeasureRequest) -> bool:
        """Would ``measure(request)`` start on the device at once, with nothing left to compile?

        The runner measures ready trials of the same job while an unready one compiles. A backend
        that prepares nothing is always ready; an invalid request is ready (it fails at once).

        Returns:
            True once :meth:`prepare` finished the request's work ahead (or there is none).
        """
        return True

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the device and every process the backend started. The backend is not used after."""
