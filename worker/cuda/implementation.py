"""The one place the worker reaches a kernel spec's CUDA implementation.

Every module of the cuda backend (and its profile target and loader) asks :func:`cuda_impl`, so a
change to how a spec declares its implementations changes this file only.
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
