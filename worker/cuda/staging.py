"""The cuda backend's part of staging (``worker/measuring/staging.py``): its implementation, NVRTC
compile jobs for the GPU's architecture, and what NVRTC adds to provenance and metrics."""

from __future__ import annotations

from typing import Any

from kernelfarm.kernels.cuda_kernel import CudaKernel
from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.worker.backends.base import MeasureRequest
from kernelfarm.worker.cuda import device as nvml
from kernelfarm.worker.cuda.compiler import CompileJob, CompilePool, CompileResult
from kernelfarm.worker.cuda.implementation import cuda_impl
from kernelfarm.worker.cuda.provenance import CudaProvenance
from kernelfarm.worker.cuda.toolkit_headers import ToolkitHeaders
from kernelfarm.worker.measuring.catalogue import KernelCatalogue
from kernelfarm.worker.measuring.staging import CompileAheadStaging


class CompileStaging(CompileAheadStaging[CompileJob, CompileResult]):
    """Validity, compile-ahead (NVRTC) and staging of requests for one GPU."""

    implementation = "CUDA"

    def __init__(
        self, catalogue: KernelCatalogue, pool: CompilePool, compute_capability: str, provenance: CudaProvenance,
        toolkit: ToolkitHeaders | None = None,
    ) -> None:  # fmt: skip
        """
        Args:
            catalogue, pool, provenance: see :class:`CompileAheadStaging`; the pool is NVRTC's.
            compute_capability: the GPU's, e.g. ``"9.0"``: the architecture compiled for.
            toolkit: the CUDA headers every compile may include (None: none).
        """
        super().__init__(catalogue, pool, provenance)
        self.compute_capability = compute_capability
        self.toolkit = toolkit

    def impl(self, spec: KernelSpec) -> CudaKernel | None:
        return cuda_impl(spec)

    def job_for(self, spec: KernelSpec, request: MeasureRequest) -> CompileJob:
        impl = cuda_impl(spec)
        assert impl is not None
        arch = nvml.arch_for(self.compute_capability, impl.arch_specific)
        return CompileJob.for_config(spec, request.config, request.problem, arch, toolkit=self.toolkit)

    def entry(self, spec: KernelSpec, job: CompileJob) -> str:
        impl = cuda_impl(spec)
        assert impl is not None
        return impl.entry

    def compile_provenance(self, job: CompileJob, compiled: CompileResult) -> dict[str, Any]:
        return {
            "compile_options": list(job.recorded_options),
            "cubin_key": job.key,
            "nvrtc_version": compiled.nvrtc_version,
            # which headers `<cuda_fp16.h>` and the like were read from (ToolkitHeaders.fingerprint)
            "cuda_headers": job.toolkit.fingerprint if job.toolkit is not None else None,
        }

    def compile_metrics(self, compiled: CompileResult) -> dict[str, Any]:
        return {
            **{f"ptxas_{k}": v for k, v in compiled.resources.items()},
            # False: NVRTC gave no ptxas report (say so rather than leave the resources out silently)
            "ptxas_reported": bool(compiled.resources),
        }
