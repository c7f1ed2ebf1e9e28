"""The triton backend's part of staging (``worker/measuring/staging.py``): its implementation, Triton
compile jobs for the GPU's architecture, and what Triton adds to provenance and metrics.

Triton compiles in a process pool (:class:`~.compiler.TritonCompilePool`) while the GPU measures
other configs; a request is "ready" once its compiled kernel (or its compile error) is waiting.
"""

from __future__ import annotations

from typing import Any

from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.kernels.triton_kernel import TritonKernel
from kernelfarm.worker.backends.base import MeasureRequest
from kernelfarm.worker.cuda.provenance import CudaProvenance
from kernelfarm.worker.measuring.catalogue import KernelCatalogue
from kernelfarm.worker.measuring.staging import CompileAheadStaging
from kernelfarm.worker.triton.compiler import TritonCompileJob, TritonCompilePool, TritonCompileResult
from kernelfarm.worker.triton.loader import triton_impl


def triton_arch(compute_capability: str) -> int:
    """Triton's architecture number of a compute capability: ``"9.0"`` -> 90."""
    major, _, minor = compute_capability.partition(".")
    return int(major) * 10 + int(minor or 0)


class TritonStaging(CompileAheadStaging[TritonCompileJob, TritonCompileResult]):
    """Validity, compile-ahead (Triton) and staging of requests for one GPU."""

    implementation = "Triton"

    def __init__(
        self, catalogue: KernelCatalogue, pool: TritonCompilePool, compute_capability: str,
        provenance: CudaProvenance, triton_version: str,
    ) -> None:  # fmt: skip
        """
        Args:
            catalogue, pool, provenance: see :class:`CompileAheadStaging`; the pool is Triton's.
            compute_capability: the GPU's, e.g. ``"9.0"``: the architecture compiled for.
            triton_version: the Triton the pool compiles with (part of every compile key).
        """
        super().__init__(catalogue, pool, provenance)
        self.arch = triton_arch(compute_capability)
        self.triton_version = triton_version

    def impl(self, spec: KernelSpec) -> TritonKernel | None:
        return triton_impl(spec)

    def job_for(self, spec: KernelSpec, request: MeasureRequest) -> TritonCompileJob:
        impl = triton_impl(spec)
        assert impl is not None
        return TritonCompileJob.for_config(impl, request.config, request.problem, self.arch, self.triton_version)

    def entry(self, spec: KernelSpec, job: TritonCompileJob) -> str:
        return job.function

    def compile_provenance(self, job: TritonCompileJob, compiled: TritonCompileResult) -> dict[str, Any]:
        return {
            "triton_version": self.triton_version,
            "triton_function": job.function,
            "triton_options": dict(job.options),
            "triton_arch": job.arch,
            "compile_key": job.key,
        }

    def compile_metrics(self, compiled: TritonCompileResult) -> dict[str, Any]:
        return {f"triton_{k}": v for k, v in compiled.resources.items()}
