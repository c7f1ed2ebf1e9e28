"""Everything the triton backend does for a request before the GPU: is the config valid here, its
compile job, compiling it ahead on the CPU cores, the measuring child's message, the ncu target.

Triton compiles in a process pool (:class:`~.compiler.TritonCompilePool`) while the GPU measures
other configs; a request is "ready" once its compiled kernel (or its compile error) is waiting.
"""

from __future__ import annotations

import time
from dataclasses import asdict

from kernelfarm.core.measurement import Measurement
from kernelfarm.core.states import FailureKind
from kernelfarm.worker.backends.base import MeasureRequest
from kernelfarm.worker.cuda.profile import ProfileTarget
from kernelfarm.worker.cuda.provenance import CudaProvenance
from kernelfarm.worker.measuring.catalogue import KernelCatalogue
from kernelfarm.worker.measuring.stream import Staged
from kernelfarm.worker.measuring.timing import TimingPolicy
from kernelfarm.worker.triton.compiler import TritonCompileJob, TritonCompilePool
from kernelfarm.worker.triton.loader import triton_impl


def triton_arch(compute_capability: str) -> int:
    """Triton's architecture number of a compute capability: ``"9.0"`` -> 90."""
    major, _, minor = compute_capability.partition(".")
    return int(major) * 10 + int(minor or 0)


class TritonStaging:
    """Validity, compile-ahead and staging of requests for one GPU."""

    def __init__(
        self, catalogue: KernelCatalogue, pool: TritonCompilePool, compute_capability: str,
        provenance: CudaProvenance, triton_version: str,
    ) -> None:  # fmt: skip
        """
        Args:
            catalogue: the kernels this backend may be asked to measure.
            pool: the compile processes (their Triton cache is shared by the host's workers).
            compute_capability: the GPU's, e.g. ``"9.0"``: the architecture compiled for.
            provenance: what every staged request records.
            triton_version: the Triton the pool compiles with (part of every compile key).
        """
        self.catalogue = catalogue
        self.pool = pool
        self.arch = triton_arch(compute_capability)
        self.provenance = provenance
        self.triton_version = triton_version

    def invalid(self, request: MeasureRequest) -> str | None:
        """Why ``request`` cannot be measured here (unknown kernel, no Triton implementation, a
        config outside the valid space), or None."""
        try:
            spec = self.catalogue.spec(request.kernel_name, request.kernel_version)
        except Exception as exc:
            return str(exc)
        if triton_impl(spec) is None:
            return f"{spec.name} has no Triton implementation"
        if not spec.space.contains(request.config, request.problem):
            return f"config {dict(request.config)} is not in the valid space of {spec.name} for {dict(request.problem)}"
        return None

    def compile_job(self, request: MeasureRequest) -> TritonCompileJob:
        """The job that compiles ``request``'s config (call only for a valid request)."""
        impl = triton_impl(self.catalogue.spec(request.kernel_name, request.kernel_version))
        assert impl is not None
        return TritonCompileJob.for_config(impl, request.config, request.problem, self.arch, self.triton_version)

    def prepare(self, requests: list[MeasureRequest]) -> None:
        """Compile ahead on the CPU cores; staging then finds the kernels ready."""
        for request in requests:
            if self.invalid(request) is None:
                self.pool.submit(self.compile_job(request))

    def ready(self, request: MeasureRequest) -> bool:
        if self.invalid(request) is not None:
            return True
        return self.pool.done(self.compile_job(request))

    def stage(self, request: MeasureRequest, policy: TimingPolicy) -> Measurement | Staged:
        """Validity and the compiled kernel (waiting for the pool if needed), as the child's request.

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
        base |= {
            "triton_version": self.triton_version,
            "triton_function": job.function,
            "triton_options": dict(job.options),
            "triton_arch": job.arch,
            "compile_key": job.key,
        }
        metrics = {
            "compile_s": compiled.seconds,
            "compile_wait_s": waited,
            "compile_cached": compiled.cached,
            **{f"triton_{k}": v for k, v in compiled.resources.items()},
        }
        if not compiled.ok:
            return Measurement.failed(FailureKind.COMPILE, compiled.log, metrics=metrics, provenance=base)
        message = {
            "op": "measure",
            "kernel": request.kernel_name,
            "problem": dict(request.problem),
            "config": dict(request.config),
            "seed": request.seed,
            "artifact": compiled.artifact,
            "policy": asdict(policy),
        }
        return Staged(message, base, metrics)

    def profile_target(self, request: MeasureRequest) -> ProfileTarget | str:
        """What ncu's target program needs to launch ``request`` once, or why it cannot (the compile
        is looked up again: a kernel measured earlier is a hit in Triton's cache)."""
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
            entry=job.function,
        )
