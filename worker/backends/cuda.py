"""The real-GPU backend: compile ahead (NVRTC process pool), measure in the isolated measuring
child (verify, time), profile with Nsight Compute in batches, and attach roofline and provenance.

A thin composition; each part has one job:

- ``worker/cuda/staging.py``: validity, compile jobs, compile-ahead, the child's message;
- ``worker/measuring/stream.py``: the pipelined measure stream on the measuring child;
- ``worker/cuda/loader.py``: what the child does with a cubin (load and launch);
- ``worker/cuda/ncu_profiler.py``: ncu batches and the standby ncu process;
- ``worker/measuring/ceilings.py``: the GPU's ceilings, measured once and cached on disk;
- ``worker/cuda/provenance.py``: the device identity and each measurement's provenance.

Construct one per GPU worker process; the process itself never creates a CUDA context::

    backend = CudaBackend()                      # device 0 of CUDA_VISIBLE_DEVICES
    backend.prepare(upcoming_requests)           # optional: compile them on the CPU cores now
    measurement = backend.measure(request)       # request.profile -> ncu profile of this trial
    measurements = backend.measure_many(requests)  # profiled ones share one ncu process
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.worker.backends.base import Backend, DeviceIdentity, KeepAlive, MeasureRequest, ProfileOutcome
from kernelfarm.worker.cuda import device as nvml
from kernelfarm.worker.cuda.compiler import CompilePool, CompileResult, nvrtc_version
from kernelfarm.worker.cuda.implementation import cuda_impl, entry_names
from kernelfarm.worker.cuda.loader import CubinLoader
from kernelfarm.worker.cuda.ncu_profiler import NcuProfiler
from kernelfarm.worker.cuda.provenance import CudaProvenance
from kernelfarm.worker.cuda.staging import CompileStaging
from kernelfarm.worker.measuring.catalogue import KernelCatalogue
from kernelfarm.worker.measuring.ceilings import CeilingsCache
from kernelfarm.worker.measuring.child import ChildConfig
from kernelfarm.worker.measuring.roofline import Ceilings, classify
from kernelfarm.worker.measuring.stream import Staged, measure_on_child
from kernelfarm.worker.measuring.supervisor import MeasuringChild
from kernelfarm.worker.measuring.timing import TimingPolicy

logger = logging.getLogger(__name__)

# A worker does not register before its compile pool has started (about 1-2 s: each process
# compiles a tiny kernel), unless that takes longer than this: then the first kernels wait instead.
_POOL_START_TIMEOUT_S = 60.0


def default_cache_dir() -> Path:
    """Where cubins and measured ceilings go unless configured (Settings.cuda_cache)."""
    return Path(tempfile.gettempdir()) / "kernelfarm-cuda"


@dataclass(frozen=True)
class CudaBackendOptions:
    device_ordinal: int = 0
    cache_dir: Path | None = None  # cubins and measured ceilings; default: default_cache_dir()
    compile_workers: int | None = None  # default: CPU cores - 1
    policy: TimingPolicy = field(default_factory=TimingPolicy)
    timeout_s: float = 60.0  # per measurement (verify + timing), after which the kernel counts as hung
    profile_timeout_s: float = 600.0
    roofline: bool = True  # measure the GPU's ceilings once (cached on disk per GPU UUID)
    # Keep the next ncu process started and waiting (worker.cuda.profile.StandbyProfiler): a batch
    # then costs its profiling, not ncu's seconds of start-up. Holds one idle CUDA context.
    profile_standby: bool = True
    child_log_level: str = "WARNING"  # the measuring child's logging (Settings.child_log)


class CudaBackend(Backend):
    name = "cuda"

    def __init__(
        self,
        options: CudaBackendOptions | None = None,
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
        self.options = options or CudaBackendOptions()
        if device_index is not None:
            self.options = replace(self.options, device_ordinal=device_index)
        ordinal = self.options.device_ordinal
        self.cache_dir = Path(self.options.cache_dir or default_cache_dir())
        self.device = nvml.query_device(ordinal)
        self.nvrtc_version = nvrtc_version()
        refs = dict(spec_refs or {})
        self._catalogue = KernelCatalogue(specs, refs)
        self._provenance = CudaProvenance(self.name, self.device, self.nvrtc_version, self._catalogue)
        warm_arch = nvml.arch_for(self.device.compute_capability)
        self._pool = CompilePool(self.cache_dir / "cubin", self.options.compile_workers, warm_arch=warm_arch)
        self._staging = CompileStaging(self._catalogue, self._pool, self.device.compute_capability, self._provenance)
        self._child = MeasuringChild(ChildConfig(CubinLoader(), ordinal, refs, self.options.child_log_level))
        self._ceilings = CeilingsCache(self.cache_dir, self.device.uuid, self.device.name, self.options.roofline)
        # The standby starts with warm_up() and after each batch.
        self._profiler = NcuProfiler(
            lambda: entry_names(self._catalogue.all()), refs, ordinal, self.options.profile_standby
        )

    def identity(self) -> DeviceIdentity:
        return self._provenance.identity()

    # ------------------------------------------------------------------ compile
    def spec(self, name: str, version: int | None = None) -> KernelSpec:
        return self._catalogue.spec(name, version)

    def prepare(self, requests: list[MeasureRequest]) -> None:
        """Compile ahead on the CPU cores; measure() then finds the cubins ready."""
        self._staging.prepare(requests)

    def ready(self, request: MeasureRequest) -> bool:
        """Compiled (or failing before any compile: an invalid config is reported at once)."""
        return self._staging.ready(request)

    def compile(self, request: MeasureRequest) -> Future[CompileResult]:
        return self._staging.compile(request)

    @property
    def compile_pool(self) -> CompilePool:
        return self._pool

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
        """Validity and the compiled cubin (waiting for NVRTC if needed), as the child's request."""
        return self._staging.stage(request, self.options.policy)

    def clocks(self) -> dict[str, Any]:
        return self._provenance.clocks()

    def roofline(self, request: MeasureRequest, timing: TimingStats) -> dict[str, Any]:
        """FLOP and bytes of the request, and where its timing sits under the GPU's ceilings."""
        ceilings = self.ceilings()
        impl = cuda_impl(self.spec(request.kernel_name, request.kernel_version))
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
        pool_ready = self._pool.wait_started(_POOL_START_TIMEOUT_S)
        logger.info("measuring child warm in %.1f s (libraries %.1f s); compile pool %s", time.perf_counter() - started,
                    reply.get("warm_s", 0.0), "started" if pool_ready else "still starting")  # fmt: skip

    def close(self) -> None:
        self._profiler.close()
        self._child.close()
        self._pool.close()
