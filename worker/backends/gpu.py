"""What the GPU backends (cuda, triton) share: compile ahead in a process pool, measure in the isolated
measuring child (verify, time), profile with Nsight Compute in batches, attach roofline and provenance.

A thin composition; each part has one job:

- staging (``worker/measuring/staging.py`` and the backend's own part): validity, compile jobs,
  compile-ahead, the child's message;
- ``worker/measuring/stream.py``: the pipelined measure stream on the measuring child;
- the backend's loader: what the child does with a compiled kernel (load and launch);
- ``worker/cuda/ncu_profiler.py``: ncu batches and the standby ncu process;
- ``worker/measuring/ceilings.py``: the GPU's ceilings, measured once and cached on disk;
- ``worker/cuda/provenance.py``: the device identity and each measurement's provenance.

A backend supplies its staging (compiler and compile pool), its loaders and its kernels' entry names
(:class:`GpuBackend`'s abstract methods). Construct one per GPU worker process; the process itself
never creates a CUDA context::

    backend = CudaBackend()                      # device 0 of CUDA_VISIBLE_DEVICES
    backend.prepare(upcoming_requests)           # optional: compile them on the CPU cores now
    measurement = backend.measure(request)       # request.profile -> ncu profile of this trial
    measurements = backend.measure_many(requests)  # profiled ones share one ncu process
"""

from __future__ import annotations

import logging
import time
from abc import abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.worker.backends.base import Backend, DeviceIdentity, KeepAlive, MeasureRequest, ProfileOutcome
from kernelfarm.worker.cuda import device as nvml
from kernelfarm.worker.cuda.ncu_profiler import NcuProfiler
from kernelfarm.worker.cuda.profile import LoaderRef
from kernelfarm.worker.measuring.catalogue import KernelCatalogue
from kernelfarm.worker.measuring.ceilings import CeilingsCache
from kernelfarm.worker.measuring.child import ChildConfig
from kernelfarm.worker.measuring.loader import KernelLoader
from kernelfarm.worker.measuring.roofline import Ceilings, classify
from kernelfarm.worker.measuring.staging import CompileAheadStaging
from kernelfarm.worker.measuring.stream import Staged, measure_on_child
from kernelfarm.worker.measuring.supervisor import MeasuringChild
from kernelfarm.worker.measuring.timing import TimingPolicy

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GpuBackendOptions:
    device_ordinal: int = 0
    cache_dir: Path | None = None  # compiled kernels and measured ceilings; default: the backend's default_cache_dir()
    compile_workers: int | None = None  # default: CPU cores - 1
    # cuda: the folders NVRTC searches for `<cuda_fp16.h>` and the like (worker/cuda/toolkit_headers.py);
    # None: the ones cuda.pathfinder finds
    cuda_include_dirs: tuple[Path, ...] | None = None
    policy: TimingPolicy = field(default_factory=TimingPolicy)
    timeout_s: float = 60.0  # per measurement (load, verify, timing), after which the kernel counts as hung
    profile_timeout_s: float = 600.0
    roofline: bool = True  # measure the GPU's ceilings once (cached on disk per GPU UUID)
    # Keep the next ncu process started and waiting (worker.cuda.profile.StandbyProfiler): a batch
    # then costs its profiling, not ncu's seconds of start-up. Holds one idle CUDA context.
    profile_standby: bool = True
    child_log_level: str = "WARNING"  # the measuring child's logging (Settings.child_log)


class GpuBackend(Backend):
    """A backend measuring on one NVIDIA GPU; subclasses supply the compiler and the loaders."""

    #: A worker does not register before its compile pool has started (each process compiles a tiny
    #: kernel), unless that takes longer than this: then the first kernels wait instead.
    pool_start_timeout_s: ClassVar[float] = 60.0

    def __init__(
        self,
        options: GpuBackendOptions | None = None,
        specs: Mapping[str, KernelSpec] | None = None,
        spec_refs: Mapping[str, str] | None = None,
        device_index: int | None = None,
    ) -> None:
        """
        Args:
            options: device, caches, timing policy, deadlines.
            specs: kernels by name; default: the registry. Kernels outside the registry (the
                tests' fault kernel) need ``spec_refs`` too, so the child can import them.
            spec_refs: kernel name -> "module:ATTR" of its KernelSpec, for the child processes.
            device_index: shorthand for ``options.device_ordinal`` (CUDA numbering, after
                CUDA_VISIBLE_DEVICES).
        """
        self.options = options or GpuBackendOptions()
        if device_index is not None:
            self.options = replace(self.options, device_ordinal=device_index)
        ordinal = self.options.device_ordinal
        self.cache_dir = Path(self.options.cache_dir or self.default_cache_dir())
        self.device = nvml.query_device(ordinal)
        refs = dict(spec_refs or {})
        self._catalogue = KernelCatalogue(specs, refs)
        self._staging = self.make_staging(self._catalogue)
        self._child = MeasuringChild(ChildConfig(self.loader(), ordinal, refs, self.options.child_log_level))
        self._ceilings = CeilingsCache(self.cache_dir, self.device.uuid, self.device.name, self.options.roofline)
        # The standby starts with warm_up() and after each batch.
        self._profiler = NcuProfiler(
            lambda: self.entry_names(self._catalogue.all()),
            refs,
            ordinal,
            self.options.profile_standby,
            loader=self.profile_loader(),
        )

    # ------------------------------------------------------------------ what a backend supplies
    @staticmethod
    @abstractmethod
    def default_cache_dir() -> Path:
        """Where compiled kernels and measured ceilings go unless configured."""

    @abstractmethod
    def make_staging(self, catalogue: KernelCatalogue) -> CompileAheadStaging[Any, Any]:
        """The backend's staging, with its compile pool started (``self.device`` and ``self.cache_dir``
        are set)."""

    @abstractmethod
    def loader(self) -> KernelLoader:
        """The measuring child's loader of this backend's compiled kernels."""

    @abstractmethod
    def profile_loader(self) -> LoaderRef | None:
        """The loader ncu's target program imports (None: the cubin loader)."""

    @abstractmethod
    def entry_names(self, specs: Sequence[KernelSpec]) -> frozenset[str]:
        """The GPU names of the kernels of ``specs`` this backend measures: what ncu's filter matches."""

    # ------------------------------------------------------------------ shared
    def identity(self) -> DeviceIdentity:
        return self._staging.provenance.identity()

    def spec(self, name: str, version: int | None = None) -> KernelSpec:
        return self._catalogue.spec(name, version)

    # ------------------------------------------------------------------ compile
    def prepare(self, requests: list[MeasureRequest]) -> None:
        """Compile ahead on the CPU cores; measure() then finds the kernels ready."""
        self._staging.prepare(requests)

    def ready(self, request: MeasureRequest) -> bool:
        """Compiled (or failing before any compile: an invalid config is reported at once)."""
        return self._staging.ready(request)

    # ------------------------------------------------------------------ measure
    def measure(self, request: MeasureRequest, keep_alive: Callable[[], bool] | None = None) -> Measurement:
        return self.measure_many([request], keep_alive)[0]

    def measure_many(
        self, requests: Sequence[MeasureRequest], keep_alive: Callable[[], bool] | None = None
    ) -> list[Measurement]:
        """Measure in order (compiling all of them ahead), then profile the verified ones whose
        request asks for it in one ncu process."""
        self.prepare(list(requests))
        results = list(self.measure_stream((request, keep_alive) for request in requests))
        wanted = [i for i, (r, m) in enumerate(zip(requests, results, strict=True)) if r.profile and m.verified]
        if wanted:
            profiled = self.profile([requests[i] for i in wanted])
            for i, outcome in zip(wanted, profiled, strict=True):
                m = results[i]
                metrics = dict(outcome.metrics) if outcome.metrics else {"profile_error": outcome.error}
                results[i] = Measurement(
                    timing=m.timing, verified=True, metrics={**m.metrics, **metrics}, provenance=m.provenance
                )
        return results

    def measure_stream(self, requests: Iterable[tuple[MeasureRequest, KeepAlive]]) -> Iterator[Measurement]:
        """Measure in order on the measuring child, pipelined (see ``measuring.stream``): the next
        request is queued on the child before this one's reply is awaited. Profiles are not taken
        here."""
        # Anything else asked of the child must come before the first request is queued on it: a
        # request sent while others are queued would overtake them (the child answers in order).
        self.ceilings()
        yield from measure_on_child(self._child, requests, self, self.options.timeout_s)

    # The three steps measure_on_child asks of this backend (measuring.stream.ChildSteps).
    def stage(self, request: MeasureRequest) -> Measurement | Staged:
        """Validity and the compiled kernel (waiting for the compiler if needed), as the child's request."""
        return self._staging.stage(request, self.options.policy)

    def clocks(self) -> dict[str, Any]:
        return self._staging.provenance.clocks()

    def roofline(self, request: MeasureRequest, timing: TimingStats) -> dict[str, Any]:
        """FLOP and bytes of the request, and where its timing sits under the GPU's ceilings."""
        ceilings = self.ceilings()
        impl = self._staging.impl(self.spec(request.kernel_name, request.kernel_version))
        assert impl is not None
        flops, moved = impl.flops(request.problem), impl.bytes_moved(request.problem)
        if ceilings is None:
            return {"flops": flops, "bytes": moved}
        return {
            "flops": flops,
            "bytes": moved,
            **classify(flops, moved, timing.median_ms * 1e-3, ceilings, impl.peak_kind(request.problem)),
        }

    def ceilings(self) -> Ceilings | None:
        return self._ceilings.get(self._child)

    # ------------------------------------------------------------------ profile
    def profile(self, requests: list[MeasureRequest]) -> list[ProfileOutcome]:
        """Profile ``requests`` in ONE ncu process (started ahead, see ``profile_standby``).

        Returns:
            One outcome per request, in order: the ncu metrics (plus ``ncu_wall_s``, this request's
            share of the batch's wall time, and ``ncu_batch_size``), or the reason there are none.
        """
        items = [self._staging.profile_target(request) for request in requests]
        return self._profiler.profile(items, self.options.profile_timeout_s)

    def profiler_ready(self) -> bool:
        """Is a standby ncu process waiting for the next batch?"""
        return self._profiler.ready()

    # ------------------------------------------------------------------ lifecycle
    def warm_up(self) -> None:
        """Start the measuring child, load its libraries and measure (or load) this GPU's ceilings:
        about 1-3 s (more on a machine whose CuPy kernel cache is empty) that would otherwise
        delay the first trial of the first job. Also starts the standby ncu process, and waits for
        the compile pool's processes (each compiles a tiny kernel as it starts, in parallel with
        the rest of this)."""
        started = time.perf_counter()
        self._profiler.start_standby()  # first: its seconds of start-up overlap the rest
        reply = self._child.warm()
        if reply.get("status") != "ok":
            logger.warning("warm-up of the measuring child failed: %s", reply.get("message"))
        self.ceilings()
        pool_ready = self._staging.pool.wait_started(self.pool_start_timeout_s)
        logger.info("%s backend: measuring child warm in %.1f s (libraries %.1f s); compile pool %s", self.name,
                    time.perf_counter() - started, reply.get("warm_s", 0.0),
                    "started" if pool_ready else "still starting")  # fmt: skip

    def close(self) -> None:
        self._profiler.close()
        self._child.close()
        self._staging.pool.close()
