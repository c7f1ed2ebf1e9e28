"""Everything the cuda backend does for a request before the GPU: is the config valid here, its
compile job, compiling it ahead on the CPU cores, and the measuring child's message for it.

NVRTC runs in a process pool (``compiler.CompilePool``) while the GPU measures other configs; a
request is "ready" once its cubin (or its compile error) is waiting, so the GPU never idles on it.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import asdict

from kernelfarm.core.measurement import Measurement
from kernelfarm.core.states import FailureKind
from kernelfarm.kernels.uploaded import bundle_directory
from kernelfarm.worker.backends.base import MeasureRequest
from kernelfarm.worker.cuda import device as nvml
from kernelfarm.worker.cuda.compiler import CompileJob, CompilePool, CompileResult
from kernelfarm.worker.cuda.implementation import cuda_impl
from kernelfarm.worker.cuda.profile import ProfileTarget
from kernelfarm.worker.cuda.provenance import CudaProvenance
from kernelfarm.worker.measuring.catalogue import KernelCatalogue
from kernelfarm.worker.measuring.stream import Staged
from kernelfarm.worker.measuring.timing import TimingPolicy


class CompileStaging:
    """Validity, compile-ahead and staging of requests for one GPU."""

    def __init__(
        self, catalogue: KernelCatalogue, pool: CompilePool, compute_capability: str, provenance: CudaProvenance
    ) -> None:
        """
        Args:
            catalogue: the kernels this backend may be asked to measure.
            pool: the NVRTC process pool (its cubin cache is shared by the host's workers).
            compute_capability: the GPU's, e.g. ``"9.0"``: the architecture compiled for.
            provenance: what every staged request records.
        """
        self.catalogue = catalogue
        self.pool = pool
        self.compute_capability = compute_capability
        self.provenance = provenance

    def invalid(self, request: MeasureRequest) -> str | None:
        """Why ``request`` cannot be measured here (unknown kernel, no CUDA implementation, a config
        outside the valid space), or None."""
        try:
            spec = self.catalogue.spec(request.kernel_name, request.kernel_version)
        except Exception as exc:
            return str(exc)
        if cuda_impl(spec) is None:
            return f"{spec.name} has no CUDA implementation"
        if not spec.space.contains(request.config, request.problem):
            return f"config {dict(request.config)} is not in the valid space of {spec.name} for {dict(request.problem)}"
        return None

    def compile_job(self, request: MeasureRequest) -> CompileJob:
        """The job that compiles ``request``'s config (call only for a valid request)."""
        spec = self.catalogue.spec(request.kernel_name, request.kernel_version)
        impl = cuda_impl(spec)
        assert impl is not None
        arch = nvml.arch_for(self.compute_capability, impl.arch_specific)
        return CompileJob.for_config(spec, request.config, request.problem, arch)

    def prepare(self, requests: list[MeasureRequest]) -> None:
        """Compile ahead on the CPU cores; staging then finds the cubins ready."""
        for request in requests:
            if self.invalid(request) is None:
                self.pool.submit(self.compile_job(request))

    def ready(self, request: MeasureRequest) -> bool:
        """Compiled (or failing before any compile: an invalid config is reported at once)."""
        if self.invalid(request) is not None:
            return True
        return self.pool.done(self.compile_job(request))

    def compile(self, request: MeasureRequest) -> Future[CompileResult]:
        return self.pool.submit(self.compile_job(request))

    def stage(self, request: MeasureRequest, policy: TimingPolicy) -> Measurement | Staged:
        """Everything before the GPU: validity and the compiled cubin (waiting for NVRTC if needed).

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
        waited = time.perf_counter() - waited  # the GPU's idle time on NVRTC: 0 when compiled ahead
        self.pool.forget(job)
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
            # False: NVRTC gave no ptxas report (say so rather than leave the resources out silently)
            "ptxas_reported": bool(compiled.resources),
        }
        if not compiled.ok:
            return Measurement.failed(FailureKind.COMPILE, compiled.log, metrics=compile_metrics, provenance=base)
        bundle = bundle_directory(self.catalogue.spec(request.kernel_name, request.kernel_version))
        message = {
            "op": "measure",
            "kernel": request.kernel_name,
            "kernel_version": request.kernel_version,
            # an uploaded kernel: the child reads it from here (it has no database access)
            "bundle": str(bundle) if bundle is not None else None,
            "problem": dict(request.problem),
            "config": dict(request.config),
            "seed": request.seed,
            "artifact": compiled.cubin_path,
            "policy": asdict(policy),
        }
        return Staged(message, base, compile_metrics)

    def profile_target(self, request: MeasureRequest) -> ProfileTarget | str:
        """What ncu's target program needs to launch ``request`` once, or why it cannot (the
        compile is looked up again: a cubin measured earlier is a cache hit on disk)."""
        if (invalid := self.invalid(request)) is not None:
            return invalid
        compiled = self.pool.result(self.compile_job(request))
        if compiled.cubin_path is None:
            return "compilation failed"
        spec = self.catalogue.spec(request.kernel_name, request.kernel_version)
        impl = cuda_impl(spec)
        assert impl is not None
        bundle = bundle_directory(spec)
        return ProfileTarget(
            kernel=request.kernel_name,
            problem=dict(request.problem),
            config=dict(request.config),
            cubin=compiled.cubin_path,
            seed=request.seed,
            entry=impl.entry,
            kernel_version=request.kernel_version,
            bundle=str(bundle) if bundle is not None else None,
        )
