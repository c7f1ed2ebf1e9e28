"""What every GPU implementation of a kernel says, whichever backend compiles and launches it (the
"cuda" one, ``cuda_kernel.py``; the "triton" one, ``triton_kernel.py``): its inputs, what it writes,
the reference and tolerance it is checked against, and its roofline figures. The measuring child's
verification and the worker's roofline read only this part.

Methods that touch arrays run inside the measuring child process (CuPy on the current device);
``flops``, ``bytes_moved``, ``peak_kind`` and ``input_set_bytes`` are pure and run anywhere.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from kernelfarm.kernels.tolerance import Tolerance


class GpuKernel(ABC):
    """Args of every method: ``problem`` is the normalized problem dict; arrays are CuPy arrays on the
    current device."""

    @abstractmethod
    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        """Fresh random inputs (never zeros) and the output buffer(s), by name."""

    @abstractmethod
    def outputs(self) -> Sequence[str]:
        """Names of the buffers the kernel writes (poisoned before each run, checked after)."""

    @abstractmethod
    def reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        """Expected output(s), computed by a trusted library (cuBLAS, CuPy, ...)."""

    @abstractmethod
    def tolerance(self, problem: Mapping[str, Any]) -> Tolerance:
        """The norm and element-wise bounds for this problem (``kernels/tolerance.py``): norm from
        the errors measured on correct configs, element from the dtypes and the reduction length."""

    @abstractmethod
    def flops(self, problem: Mapping[str, Any]) -> float:
        """Useful floating-point operations of one launch (for the roofline)."""

    @abstractmethod
    def bytes_moved(self, problem: Mapping[str, Any]) -> float:
        """Minimum DRAM bytes one launch must move (for the roofline)."""

    def peak_kind(self, problem: Mapping[str, Any]) -> str:
        """Which compute ceiling applies: ``"fp32"`` (FFMA) or ``"tensor"`` (bf16/fp16 MMA)."""
        return "fp32"

    def input_set_bytes(self, problem: Mapping[str, Any]) -> int | None:
        """Device bytes of one input set of ``problem``, as the measuring child keeps it: every buffer
        :meth:`make_inputs` returns plus every array :meth:`reference` returns, from their shapes and
        dtypes (transients of making them, and the verifier's scratch, are not counted). The farm
        refuses a problem whose footprint (:meth:`KernelSpec.device_bytes`, two input sets) cannot
        fit in the GPU's memory.

        None (the default): not declared; the problem is then accepted whatever its size, and a
        worker that runs out of device memory records the trial as failed, saying so. Every kernel
        of the catalogue declares it (the kernel contract suite checks).
        """
        return None
