"""The Triton backend: compile ahead (``triton.compile`` for the GPU's architecture, in a process
pool), measure in the shared measuring child (verify against the reference, time with the one
timing function), profile with Nsight Compute in batches, and attach roofline and provenance.

The same composition as the cuda backend, with Triton's compile step and loader:

- ``worker/triton/staging.py``: validity, compile jobs, compile-ahead, the child's message;
- ``worker/triton/compiler.py``: the compile pool and Triton's on-disk cache;
- ``worker/triton/loader.py``: what the child does with a compiled kernel (load, bind CuPy buffers, launch);
- shared with the cuda backend: ``worker/measuring/`` (child, stream, timing, verifier, ceilings,
  roofline) and ``worker/cuda/`` (NVML identity and clocks, ncu batches and standby).

It measures the kernels with a ``"triton"`` implementation (``kernels/triton_kernel.py``); any other
kernel is a CONSTRAINT failure, as for the cuda backend. The worker process never imports Triton.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.worker.backends.base import Backend, DeviceIdentity, KeepAlive, MeasureRequest, ProfileOutcome
from kernelfarm.worker.cuda import device as nvml
from kernelfarm.worker.cuda.ncu_profiler import NcuProfiler
from kernelfarm.worker.cuda.profile import LoaderRef
from kernelfarm.worker.cuda.provenance import CudaProvenance
from kernelfarm.worker.measuring.catalogue import KernelCatalogue
from kernelfarm.worker.measuring.ceilings import CeilingsCache
from kernelfarm.worker.measuring.child import ChildConfig
from kernelfarm.worker.measuring.roofline import Ceilings, classify
from kernelfarm.worker.measuring.stream import Staged, measure_on_child
from kernelfarm.worker.measuring.supervisor import MeasuringChild
from kernelfarm.worker.measuring.timing import TimingPolicy
from kernelfarm.worker.triton.compiler import TritonCompilePool
from kernelfarm.worker.triton.loader import TritonLoader, entry_names, triton_impl
from kernelfarm.worker.triton.staging import TritonStaging, triton_arch

logger = logging.getLogger(__name__)

_POOL_START_TIMEOUT_S = 120.0


def default_cache_dir() -> Path:
    """Where Triton's kernels and launchers and the measured ceilings go unless configured."""
    return Path(tempfile.gettempdir()) / "kernelfarm-triton"


def triton_version() -> str:
    """The installed Triton's version, read without importing it."""
    return metadata.version("triton")


@dataclass(frozen=True)
class TritonBackendOptions:
    device_ordinal: int = 0
    cache_dir: Path | None = None  # Triton's cache (subfolder "triton") and measured ceilings
    compile_workers: int | None = None  # default: CPU cores - 1
    policy: TimingPolicy = field(default_factory=TimingPolicy)
    timeout_s: float = 60.0  # per measurement (load, verify, timing), after which the kernel counts as hung
    profile_timeout_s: float = 600.0
    roofline: bool = True
    profile_standby: bool = True
    child_log_level: str = "WARNING"


class TritonProvenance(CudaProvenance):
    """The cuda backend's device identity and provenance, with Triton's version instead of NVRTC's."""

    def __init__(self, backend: str, device: nvml.NvmlDevice, version: str, catalogue: KernelCatalogue) -> None:
        super().__init__(backend, device, "", catalogue)
        self.triton_version = version

    def identity(self) -> DeviceIdentity:
        identity = super().identity()
        extra = {k: v for k, v in (identity.extra or {}).items() if k != "nvrtc_version"}
        return replace(identity, extra=extra | {"triton_version": self.triton_version})

    def for_request(self, request: MeasureRequest, policy: TimingPolicy) -> dict[str, Any]:
        out = super().for_request(request, policy)
        out.pop("nvrtc_version", None)
        return out | {"triton_version": self.triton_version}


class TritonBackend(Backend):
    name = "triton"

    def __init__(
        self,
        options: TritonBackendOptions | None = None,
        specs: Mapping[str, KernelSpec] | None = None,
        spec_refs: Mapping[str, str] | None = None,
        device_index: int | None = None,
    ) -> None:
        """
        Args:
            options: device, caches, timing policy, deadlines.
            specs: kernels by name; default: the registry (``spec_refs`` for kernels outside it).
            spec_refs: kernel name -> "module:ATTR" of its KernelSpec, for the child processes.
            device_index: shorthand for ``options.device_ordinal``.
        """
        self.options = options or TritonBackendOptions()
        if device_index is not None:
            self.options = replace(self.options, device_ordinal=device_index)
        ordinal = self.options.device_ordinal
        self.cache_dir = Path(self.options.cache_dir or default_cache_dir())
        self.device = nvml.query_device(ordinal)
        self.triton_version = triton_version()
        refs = dict(spec_refs or {})
        self._catalogue = KernelCatalogue(specs, refs)
        self._provenance = TritonProvenance(self.name, self.device, self.triton_version, self._catalogue)
        triton_cache = self.cache_dir / "triton"
        arch = triton_arch(self.device.compute_capability)
        self._pool = TritonCompilePool(triton_cache, self.options.compile_workers, arch=arch)
        self._staging = TritonStaging(
            self._catalogue, self._pool, self.device.compute_capability, self._provenance, self.triton_version
        )
        loader = TritonLoader(str(triton_cache))
        self._child = MeasuringChild(ChildConfig(loader, ordinal, refs, self.options.child_log_level))
        self._ceilings = CeilingsCache(self.cache_dir, self.device.uuid, self.device.name, self.options.roofline)
        self._profiler = NcuProfiler(
            lambda: entry_names(self._catalogue.all()),
            refs,
            ordinal,
            self.options.profile_standby,
            loader=LoaderRef("kernelfarm.worker.triton.loader:TritonLoader", {"cache_dir": str(triton_cache)}),
        )

    def identity(self) -> DeviceIdentity:
        return self._provenance.identity()

    def spec(self, name: str) -> KernelSpec:
        return self._catalogue.spec(name)

    # ------------------------------------------------------------------ compile
    def prepare(self, requests: list[MeasureRequest]) -> None:
        """Compile ahead on the CPU cores; measure() then finds the kernels ready."""
        self._staging.prepare(requests)

    def ready(self, request: MeasureRequest) -> bool:
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
            for i, outcome in zip(wanted, self.profile([requests[i] for i in wanted]), strict=True):
                m = results[i]
                extra = dict(outcome.metrics) if outcome.metrics else {"profile_error": outcome.error}
                results[i] = Measurement(timing=m.timing, verified=True, metrics={**m.metrics, **extra},
                                         provenance=m.provenance)  # fmt: skip
        return results

    def measure_stream(self, requests: Iterable[tuple[MeasureRequest, KeepAlive]]) -> Iterator[Measurement]:
        """Measure in order on the measuring child, pipelined (see ``measuring.stream``)."""
        self.ceilings()  # before the first request is queued on the child (it answers in order)
        yield from measure_on_child(self._child, requests, self, self.options.timeout_s)

    def stage(self, request: MeasureRequest) -> Measurement | Staged:
        return self._staging.stage(request, self.options.policy)

    def clocks(self) -> dict[str, Any]:
        return self._provenance.clocks()

    def roofline(self, request: MeasureRequest, timing: TimingStats) -> dict[str, Any]:
        impl = triton_impl(self.spec(request.kernel_name))
        assert impl is not None
        flops, moved = impl.flops(request.problem), impl.bytes_moved(request.problem)
        ceilings = self.ceilings()
        if ceilings is None:
            return {"flops": flops, "bytes": moved}
        peak = impl.peak_kind(request.problem)
        return {"flops": flops, "bytes": moved, **classify(flops, moved, timing.median_ms * 1e-3, ceilings, peak)}

    def ceilings(self) -> Ceilings | None:
        return self._ceilings.get(self._child)

    # ------------------------------------------------------------------ profile
    def profile(self, requests: list[MeasureRequest]) -> list[ProfileOutcome]:
        """Profile ``requests`` in ONE ncu process; ncu's filter matches Triton's kernel names."""
        items = [self._staging.profile_target(request) for request in requests]
        return self._profiler.profile(items, self.options.profile_timeout_s)

    def profiler_ready(self) -> bool:
        return self._profiler.ready()

    # ------------------------------------------------------------------ lifecycle
    def warm_up(self) -> None:
        """Start the standby ncu process, the measuring child (CuPy, torch, Triton's driver) and
        the compile processes (each compiles a tiny kernel), and measure or load the ceilings."""
        started = time.perf_counter()
        self._profiler.start_standby()
        reply = self._child.warm()
        if reply.get("status") != "ok":
            logger.warning("warm-up of the measuring child failed: %s", reply.get("message"))
        self.ceilings()
        pool_ready = self._pool.wait_started(_POOL_START_TIMEOUT_S)
        logger.info("triton backend warm in %.1f s; compile pool %s", time.perf_counter() - started,
                    "started" if pool_ready else "still starting")  # fmt: skip

    def close(self) -> None:
        self._profiler.close()
        self._child.close()
        self._pool.close()
