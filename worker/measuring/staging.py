"""Everything a GPU backend does for a request before the GPU, shared by the cuda and triton backends:
is the config valid here, its compile job, compiling it ahead on the CPU cores, the measuring child's
message for it, and ncu's target.

The compiler runs in a process pool (``compile_pool.ProcessCompilePool``) while the GPU measures other
configs; a request is "ready" once its compiled kernel (or its compile error) is waiting, so the GPU
never idles on it. A backend supplies its implementation lookup, its compile job and what a compile
adds to the provenance and the metrics (``worker/cuda/staging.py``, ``worker/triton/staging.py``).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from concurrent.futures import Future
from dataclasses import asdict
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from kernelfarm.core.measurement import Measurement
from kernelfarm.core.states import FailureKind
from kernelfarm.kernels.gpu_kernel import GpuKernel
from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.kernels.uploaded import bundle_directory
from kernelfarm.worker.backends.base import MeasureRequest, device_memory_refusal
from kernelfarm.worker.cuda.profile import ProfileTarget
from kernelfarm.worker.cuda.provenance import CudaProvenance
from kernelfarm.worker.measuring.catalogue import KernelCatalogue
from kernelfarm.worker.measuring.compile_pool import Keyed, ProcessCompilePool
from kernelfarm.worker.measuring.stream import Staged
from kernelfarm.worker.measuring.timing import TimingPolicy


class Compiled(Protocol):
    """What staging reads of a compile's result."""

    @property
    def artifact(self) -> str | None:
        """What the measuring child loads (None: compilation failed)."""

    @property
    def log(self) -> str: ...

    @property
    def seconds(self) -> float: ...

    @property
    def cached(self) -> bool: ...

    @property
    def ok(self) -> bool: ...


JobT = TypeVar("JobT", bound=Keyed)
ResultT = TypeVar("ResultT", bound=Compiled)


class CompileAheadStaging(ABC, Generic[JobT, ResultT]):
    """Validity, compile-ahead and staging of requests for one GPU."""

    #: the implementation's name in messages: "CUDA", "Triton"
    implementation: ClassVar[str]

    def __init__(
        self, catalogue: KernelCatalogue, pool: ProcessCompilePool[JobT, ResultT], provenance: CudaProvenance
    ) -> None:
        """
        Args:
            catalogue: the kernels this backend may be asked to measure.
            pool: the compile processes (their cache is shared by the host's workers).
            provenance: what every staged request records.
        """
        self.catalogue = catalogue
        self.pool = pool
        self.provenance = provenance

    # ------------------------------------------------------------------ what a backend supplies
    @abstractmethod
    def impl(self, spec: KernelSpec) -> GpuKernel | None:
        """``spec``'s implementation that this backend compiles, or None when it has none."""

    @abstractmethod
    def job_for(self, spec: KernelSpec, request: MeasureRequest) -> JobT:
        """The job that compiles ``request``'s config of ``spec`` (which has an implementation here)."""

    @abstractmethod
    def entry(self, spec: KernelSpec, job: JobT) -> str:
        """The compiled kernel's entry name: what ncu's filter matches."""

    @abstractmethod
    def compile_provenance(self, job: JobT, compiled: ResultT) -> dict[str, Any]:
        """What the compile adds to the measurement's provenance (options, versions, key)."""

    @abstractmethod
    def compile_metrics(self, compiled: ResultT) -> dict[str, Any]:
        """The compiler's report on the kernel's resources, as metrics."""

    # ------------------------------------------------------------------ shared
    def spec(self, request: MeasureRequest) -> KernelSpec:
        """The kernel at the version the job pinned.

        Raises:
            NotFound: no such kernel (or version).
        """
        return self.catalogue.spec(request.kernel_name, request.kernel_version)

    def invalid(self, request: MeasureRequest) -> str | None:
        """Why ``request`` cannot be measured here (unknown kernel, no implementation for this
        backend, a config outside the valid space, a problem that cannot fit in the GPU's memory),
        or None."""
        try:
            spec = self.spec(request)
        except Exception as exc:
            return str(exc)
        if self.impl(spec) is None:
            return f"{spec.name} has no {self.implementation} implementation"
        if not spec.space.contains(request.config, request.problem):
            return f"config {dict(request.config)} is not in the valid space of {spec.name} for {dict(request.problem)}"
        # Before anything is compiled or allocated: the job was accepted for a GPU model whose memory
        # the API did not know, or knew as larger (a smaller worker of the model registered since).
        return device_memory_refusal(spec, request.problem, self.provenance.device.memory_bytes)

    def compile_job(self, request: MeasureRequest) -> JobT:
        """The job that compiles ``request``'s config (call only for a valid request)."""
        return self.job_for(self.spec(request), request)

    def prepare(self, requests: list[MeasureRequest]) -> None:
        """Compile ahead on the CPU cores; staging then finds the kernels ready."""
        for request in requests:
            if self.invalid(request) is None:
                self.pool.submit(self.compile_job(request))

    def ready(self, request: MeasureRequest) -> bool:
        """Compiled (or failing before any compile: an invalid config is reported at once)."""
        if self.invalid(request) is not None:
            return True
        return self.pool.done(self.compile_job(request))

    def compile(self, request: MeasureRequest) -> Future[ResultT]:
        return self.pool.submit(self.compile_job(request))

    def stage(self, request: MeasureRequest, policy: TimingPolicy) -> Measurement | Staged:
        """Everything before the GPU: validity and the compiled kernel (waiting for the pool if needed).

        Returns:
            The child's request, or the failure that ends the trial here (CONSTRAINT, COMPILE).
        """
        invalid = self.invalid(request)
        base = self.provenance.for_request(request, policy)
        if invalid is not None:
            return Measurement.failed(FailureKind.CONSTRAINT, invalid, provenance=base)
        job = self.compile_job(request)
        waited = time.perf_counter()
        compiled = self.pool.result(job)
        waited = time.perf_counter() - waited  # the GPU's idle time on the compiler: 0 when compiled ahead
        self.pool.forget(job)
        base |= self.compile_provenance(job, compiled)
        metrics = {
            "compile_s": compiled.seconds,
            "compile_wait_s": waited,
            "compile_cached": compiled.cached,
            **self.compile_metrics(compiled),
        }
        if not compiled.ok:
            return Measurement.failed(FailureKind.COMPILE, compiled.log, metrics=metrics, provenance=base)
        message = {
            "op": "measure",
            "kernel": request.kernel_name,
            "kernel_version": request.kernel_version,
            # an uploaded kernel: the child reads it from here (it has no database access)
            "bundle": self.bundle(request),
            "problem": dict(request.problem),
            "config": dict(request.config),
            "seed": request.seed,
            "artifact": compiled.artifact,
            "policy": asdict(policy),
            "energy": request.energy,  # the child meters energy only when asked (core/objectives.py)
        }
        return Staged(message, base, metrics)

    def profile_target(self, request: MeasureRequest) -> ProfileTarget | str:
        """What ncu's target program needs to launch ``request`` once, or why it cannot (the compile
        is looked up again: a kernel measured earlier is a hit in the compile cache)."""
        if (invalid := self.invalid(request)) is not None:
            return invalid
        job = self.compile_job(request)
        compiled = self.pool.result(job)
        if compiled.artifact is None:
            return "compilation failed"
        return ProfileTarget(
            kernel=request.kernel_name,
            problem=dict(request.problem),
            config=dict(request.config),
            cubin=compiled.artifact,
            seed=request.seed,
            entry=self.entry(self.spec(request), job),
            kernel_version=request.kernel_version,
            bundle=self.bundle(request),
        )

    def bundle(self, request: MeasureRequest) -> str | None:
        """Where an uploaded kernel's bundle is materialized (None for other kernels)."""
        bundle = bundle_directory(self.spec(request))
        return str(bundle) if bundle is not None else None
