"""The real-GPU backend: compile ahead (NVRTC process pool), measure in an isolated child
(verify, time), profile with Nsight Compute in batches, and attach roofline and provenance.

Construct one per GPU worker process; the process itself never creates a CUDA context::

    backend = CudaBackend()                      # device 0 of CUDA_VISIBLE_DEVICES
    backend.prepare(upcoming_requests)           # optional: compile them on the CPU cores now
    measurement = backend.measure(request)       # request.profile -> ncu profile of this trial
    measurements = backend.measure_many(requests)  # profiled ones share one ncu process
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelfarm.core.gpu import model_slug
from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.core.states import FailureKind
from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.worker.backends.base import Backend, DeviceIdentity, KeepAlive, MeasureRequest, ProfileOutcome
from kernelfarm.worker.cuda import device as nvml
from kernelfarm.worker.cuda.bench import BenchPolicy
from kernelfarm.worker.cuda.compiler import CompileJob, CompilePool, CompileResult, nvrtc_version
from kernelfarm.worker.cuda.isolation import MeasuringChild
from kernelfarm.worker.cuda.profile import ProfileBatchResult, ProfileTarget, StandbyProfiler, find_ncu, profile_batch
from kernelfarm.worker.cuda.roofline import Ceilings, classify

logger = logging.getLogger(__name__)

# A worker does not register before its compile pool has started (about 1-2 s: each process
# compiles a tiny kernel), unless that takes longer than this: then the first kernels wait instead.
_POOL_START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class CudaBackendOptions:
    device_ordinal: int = 0
    cache_dir: Path | None = None  # cubins and measured ceilings; default $TMPDIR/kernelfarm-cuda
    compile_workers: int | None = None  # default: CPU cores - 1
    policy: BenchPolicy = field(default_factory=BenchPolicy)
    timeout_s: float = 60.0  # per measurement (verify + timing), after which the kernel counts as hung
    profile_timeout_s: float = 600.0
    roofline: bool = True  # measure the GPU's ceilings once (cached on disk per GPU UUID)
    # Keep the next ncu process started and waiting (worker.cuda.profile.StandbyProfiler): a batch
    # then costs its profiling, not ncu's seconds of start-up. Holds one idle CUDA context.
    profile_standby: bool = True


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
        self._specs = dict(specs) if specs is not None else None
        self._refs = dict(spec_refs or {})
        cache = self.options.cache_dir or Path(tempfile.gettempdir()) / "kernelfarm-cuda"
        self.cache_dir = Path(cache)
        self.device = nvml.query_device(self.options.device_ordinal)
        self.nvrtc_version = nvrtc_version()
        warm_arch = nvml.arch_for(self.device.compute_capability)
        self._pool = CompilePool(self.cache_dir / "cubin", self.options.compile_workers, warm_arch=warm_arch)
        self._child = MeasuringChild(self.options.device_ordinal, self._refs)
        self._ceilings: Ceilings | None = None
        self._standby: StandbyProfiler | None = None  # started by warm_up() and after each batch

    # ------------------------------------------------------------------ identity
    def identity(self) -> DeviceIdentity:
        d = self.device
        return DeviceIdentity(
            gpu_name=d.name,
            gpu_model=model_slug(d.name),
            gpu_uuid=d.uuid,
            compute_capability=d.compute_capability,
            driver_version=d.driver_version,
            cuda_version=d.cuda_driver_version,
            extra={
                "nvrtc_version": self.nvrtc_version,
                "memory_bytes": d.memory_bytes,
                "max_sm_clock_mhz": d.max_sm_clock_mhz,
                "max_mem_clock_mhz": d.max_mem_clock_mhz,
            },
        )

    # ------------------------------------------------------------------ compile
    def spec(self, name: str) -> KernelSpec:
        if self._specs is not None and name in self._specs:
            return self._specs[name]
        from kernelfarm.kernels.registry import get_kernel

        return get_kernel(name)

    def compile_job(self, request: MeasureRequest) -> CompileJob:
        spec = self.spec(request.kernel_name)
        assert spec.cuda is not None
        arch = nvml.arch_for(self.device.compute_capability, spec.cuda.arch_specific)
        return CompileJob.for_config(spec, request.config, request.problem, arch)

    def prepare(self, requests: list[MeasureRequest]) -> None:
        """Compile ahead on the CPU cores; measure() then finds the cubins ready."""
        for request in requests:
            if self._valid(request) is None:
                self._pool.submit(self.compile_job(request))

    def ready(self, request: MeasureRequest) -> bool:
        """Compiled (or failing before any compile: an invalid config is reported at once)."""
        if self._valid(request) is not None:
            return True
        return self._pool.done(self.compile_job(request))

    def compile(self, request: MeasureRequest) -> Future[CompileResult]:
        return self._pool.submit(self.compile_job(request))

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
        """Measure in order, yielding each result as soon as the child answers. The next request is
        queued on the child before this one's reply is awaited, so the GPU keeps measuring while the
        caller stores a result; it is pulled (and staged: its compile may still run) only after this
        one was sent. Profiles are not taken here."""
        # Anything else asked of the child must come before the first request is queued on it: a
        # request sent while others are queued would overtake them (the child answers in order).
        self.ceilings()
        source = iter(requests)
        pulled: list[tuple[MeasureRequest, KeepAlive]] = []
        staged: dict[int, Measurement | _Staged] = {}

        def stage(index: int) -> Measurement | _Staged | None:
            while len(pulled) <= index:
                pair = next(source, None)
                if pair is None:
                    return None
                pulled.append(pair)
                self.prepare([pair[0]])
            if index not in staged:
                staged[index] = self._stage(pulled[index][0])
            return staged[index]

        sent: dict[int, _Sent] = {}
        i = 0
        while (entry := stage(i)) is not None:
            if isinstance(entry, _Staged):
                # This request and the next one queued on the child (again, after a replaced child
                # lost them).
                for j in (i, i + 1):
                    queued = stage(j)
                    if isinstance(queued, _Staged) and (j not in sent or not self._child.in_flight(sent[j].sequence)):
                        sent[j] = _Sent(self._child.send(queued.message), time.perf_counter())
                clocks_before = nvml.read_clocks(self.device.index)
                reply = self._child.receive(sent[i].sequence, self.options.timeout_s, pulled[i][1])
                assert reply is not None  # the oldest request in flight cannot have been lost
                sent[i].answered = time.perf_counter()
                # The child starts a queued request once it has answered the one before it.
                previous = sent.get(i - 1)
                started = max(sent[i].at, previous.answered if previous is not None else 0.0)
                entry = self._measured(pulled[i][0], entry, reply, sent[i].answered - started, clocks_before)
            yield entry  # a Measurement: measured, or failed before reaching the GPU
            i += 1

    def _valid(self, request: MeasureRequest) -> str | None:
        try:
            spec = self.spec(request.kernel_name)
        except Exception as exc:
            return str(exc)
        if spec.cuda is None:
            return f"{spec.name} has no CUDA implementation"
        if not spec.space.contains(request.config, request.problem):
            return f"config {dict(request.config)} is not in the valid space of {spec.name} for {dict(request.problem)}"
        return None

    def _stage(self, request: MeasureRequest) -> Measurement | _Staged:
        """Everything before the GPU: validity and the compiled cubin (waiting for NVRTC if needed).
        Returns the child's request, or the failure that ends the trial here."""
        invalid = self._valid(request)
        base = self._provenance(request)
        if invalid is not None:
            return Measurement.failed(FailureKind.CONSTRAINT, invalid, provenance=base)
        job = self.compile_job(request)
        waited = time.perf_counter()
        compiled = self._pool.result(job)
        waited = time.perf_counter() - waited  # the GPU's idle time on NVRTC: 0 when compiled ahead
        self._pool.forget(job)
        base |= {
            "compile_options": list(job.options),
            "cubin_key": job.key,
            "nvrtc_version": compiled.nvrtc_version,
        }
        compile_metrics = {
            "compile_s": compiled.seconds,
            "compile_wait_s": waited,
            "compile_cached": compiled.cached,
            **{f"ptxas_{k}": v for k, v in compiled.resources.items()},
        }
        if not compiled.ok:
            return Measurement.failed(FailureKind.COMPILE, compiled.log, metrics=compile_metrics, provenance=base)
        message = {
            "op": "measure",
            "kernel": request.kernel_name,
            "problem": dict(request.problem),
            "config": dict(request.config),
            "seed": request.seed,
            "cubin": compiled.cubin_path,
            "policy": asdict(self.options.policy),
        }
        return _Staged(message, base, compile_metrics)

    def _measured(
        self, request: MeasureRequest, staged: _Staged, reply: Mapping[str, Any], wall: float,
        clocks_before: Mapping[str, Any],
    ) -> Measurement:  # fmt: skip
        """The child's reply as a Measurement, with provenance, the time split and the roofline."""
        provenance = staged.provenance | {
            "clocks_before": clocks_before,
            "clocks_after": nvml.read_clocks(self.device.index),
            **self._child.environment,
        }
        metrics = staged.compile_metrics | {
            "measure_wall_s": wall,
            "gpu_s": reply.get("gpu_s", 0.0),
            **{k: v for k, v in reply.get("resources", {}).items()},
        }
        for key in ("child_s", "child_started_at", "data_s", "rel_error"):
            if key in reply:
                metrics[key] = reply[key]
        if reply.get("status") != "ok":
            kind = FailureKind(reply.get("kind", FailureKind.CRASH.value))
            return Measurement.failed(kind, str(reply.get("message", "")), metrics=metrics, provenance=provenance)
        timing = TimingStats.from_times(reply["times_ms"])
        metrics |= self._roofline(request, timing)
        return Measurement(timing=timing, verified=True, metrics=metrics, provenance=provenance)

    def _provenance(self, request: MeasureRequest) -> dict[str, Any]:
        d = self.device
        out: dict[str, Any] = {
            "backend": self.name,
            "gpu_name": d.name,
            "gpu_uuid": d.uuid,
            "compute_capability": d.compute_capability,
            "driver_version": d.driver_version,
            "cuda_driver_version": d.cuda_driver_version,
            "nvrtc_version": self.nvrtc_version,
            "seed": request.seed,
            "bench_policy": asdict(self.options.policy),
        }
        with contextlib.suppress(Exception):  # an unknown kernel is reported by the constraint check
            out["source_hash"] = self.spec(request.kernel_name).source_hash
        return out

    def warm_up(self) -> None:
        """Start the measuring child, load its libraries and measure (or load) this GPU's ceilings:
        about 1-3 s (more on a machine whose CuPy kernel cache is empty) that would otherwise
        delay the first trial of the first job. Also starts the standby ncu process, and waits for
        the compile pool's processes (each compiles a tiny kernel as it starts, in parallel with
        the rest of this)."""
        started = time.perf_counter()
        if self._standby is None:
            self._start_standby()
        reply = self._child.ask({"op": "warm"}, 300.0)
        if reply.get("status") != "ok":
            logger.warning("warm-up of the measuring child failed: %s", reply.get("message"))
        self.ceilings()
        pool_ready = self._pool.wait_started(_POOL_START_TIMEOUT_S)
        logger.info("measuring child warm in %.1f s (libraries %.1f s); compile pool %s", time.perf_counter() - started,
                    reply.get("warm_s", 0.0), "started" if pool_ready else "still starting")  # fmt: skip

    # ------------------------------------------------------------------ roofline
    def ceilings(self) -> Ceilings | None:
        if self._ceilings is not None or not self.options.roofline:
            return self._ceilings
        path = self.cache_dir / f"ceilings-{self.device.uuid}.json"
        if path.is_file():
            self._ceilings = Ceilings(**json.loads(path.read_text()))
            return self._ceilings
        reply = self._child.ask({"op": "ceilings"}, 300.0)
        if reply.get("status") != "ok":
            logger.warning("ceilings not measured: %s", reply.get("message"))
            return None
        self._ceilings = Ceilings(**reply["ceilings"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self._ceilings)))
        logger.info("measured ceilings of %s: %s", self.device.name, self._ceilings)
        return self._ceilings

    def _roofline(self, request: MeasureRequest, timing: TimingStats) -> dict[str, Any]:
        ceilings = self.ceilings()
        spec = self.spec(request.kernel_name)
        assert spec.cuda is not None
        flops, moved = spec.cuda.flops(request.problem), spec.cuda.bytes_moved(request.problem)
        if ceilings is None:
            return {"flops": flops, "bytes": moved}
        return {
            "flops": flops,
            "bytes": moved,
            **classify(flops, moved, timing.median_ms * 1e-3, ceilings, spec.cuda.peak_kind(request.problem)),
        }

    # ------------------------------------------------------------------ profile
    def profile(self, requests: list[MeasureRequest]) -> list[ProfileOutcome]:
        """Profile ``requests`` in ONE ncu process (started ahead, see ``profile_standby``).

        Returns:
            One outcome per request, in order: the ncu metrics (plus ``ncu_wall_s``, this request's
            share of the batch's wall time, and ``ncu_batch_size``), or the reason there are none.
        """
        outcomes: list[ProfileOutcome | None] = [None] * len(requests)
        targets, where = [], []
        for i, request in enumerate(requests):
            if (invalid := self._valid(request)) is not None:
                outcomes[i] = ProfileOutcome(None, invalid)
                continue
            compiled = self._pool.result(self.compile_job(request))
            if compiled.cubin_path is None:
                outcomes[i] = ProfileOutcome(None, "compilation failed")
                continue
            where.append(i)
            targets.append(
                ProfileTarget(
                    request.kernel_name,
                    dict(request.problem),
                    dict(request.config),
                    compiled.cubin_path,
                    request.seed,
                )
            )
        if targets:
            batch, standby = self._profile_batch(targets)
            share = batch.wall_s / len(targets)
            for i, metrics in zip(where, batch.metrics, strict=True):
                if metrics is None:
                    outcomes[i] = ProfileOutcome(None, batch.error or "not profiled")
                else:
                    outcomes[i] = ProfileOutcome({**metrics, "ncu_wall_s": share, "ncu_batch_size": len(targets),
                                                  "ncu_standby": standby})  # fmt: skip
        return [o if o is not None else ProfileOutcome(None, "not profiled") for o in outcomes]

    def _profile_batch(self, targets: list[ProfileTarget]) -> tuple[ProfileBatchResult, bool]:
        """On the standby ncu process if one is ready (then start the next), else a fresh one.
        Returns the batch and whether the standby ran it."""
        standby, self._standby = self._standby, None
        batch = standby.run(targets, self.options.profile_timeout_s) if standby is not None else None
        used_standby = batch is not None
        if batch is None:
            batch = profile_batch(targets, self._refs, self.options.device_ordinal, self.options.profile_timeout_s)
        self._start_standby()
        return batch, used_standby

    def profiler_ready(self) -> bool:
        """Is a standby ncu process waiting for the next batch?"""
        return self._standby is not None and self._standby.ready()

    def _start_standby(self) -> None:
        ncu = find_ncu() if self.options.profile_standby else None
        if ncu is not None:
            self._standby = StandbyProfiler(ncu, self._refs, self.options.device_ordinal)

    def close(self) -> None:
        if self._standby is not None:
            self._standby.close()
        self._child.close()
        self._pool.close()


def default_cache_dir() -> Path:
    return Path(os.environ.get("KERNELFARM_CUDA_CACHE", Path(tempfile.gettempdir()) / "kernelfarm-cuda"))


@dataclass(frozen=True)
class _Staged:
    """A request ready for the child: its message, and what its Measurement will carry."""

    message: dict[str, Any]
    provenance: dict[str, Any]
    compile_metrics: dict[str, Any]


@dataclass
class _Sent:
    sequence: int
    at: float  # perf_counter when it was sent to the child
    answered: float = 0.0  # perf_counter when its reply arrived
