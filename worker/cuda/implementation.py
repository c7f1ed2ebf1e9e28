"""A kernel spec's CUDA implementation, or None, for the cuda backend's modules.

The backend's staging, measuring, profiling and ncu-filter code ask :func:`cuda_impl` where a kernel
may have no CUDA implementation (a replay-only kernel is then reported, not raised);
``CompileJob.for_config`` uses the spec's typed accessor directly, since it is only ever called for a
kernel that has one.
"""

from __future__ import annotations

from collections.abc import Iterable

from kernelfarm.kernels.cuda_kernel import CudaKernel
from kernelfarm.kernels.spec import KernelSpec


def cuda_impl(spec: KernelSpec) -> CudaKernel | None:
    """The kernel's CUDA implementation, or None when it has none (a replay-only kernel)."""
    return spec.impl("cuda", CudaKernel) if "cuda" in spec.backends else None


def entry_names(specs: Iterable[KernelSpec]) -> frozenset[str]:
    """The ``extern "C"`` entry names of the kernels with a CUDA implementation: what a profiler
    filters on to see these kernels and nothing else (not the kernels that make their inputs)."""
    return frozenset(impl.entry for spec in specs if (impl := cuda_impl(spec)) is not None)
