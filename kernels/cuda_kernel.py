"""The "cuda" implementation of a kernel: how the cuda backend compiles, launches and checks it.

Each CUDA kernel folder implements this class next to its ``.cu`` template and declares it as
``impls={"cuda": MyKernel(CudaSource.from_file(...))}`` in its spec. The worker's cuda backend only
talks to this interface, so adding a kernel never touches the worker. Methods that touch arrays run
inside the measuring child process (CuPy on the current device); ``defines``, ``launch``, ``flops``
and ``bytes_moved`` are pure and run anywhere.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kernelfarm.kernels.cuda_source import CudaSource
from kernelfarm.kernels.tolerance import Tolerance


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


class CudaKernel(ABC):
    """Args of every method: ``config`` is one point of the spec's search space, ``problem`` the
    normalized problem dict. Arrays are CuPy arrays on the current device."""

    #: name of the ``extern "C" __global__`` function in the template; the profiler's kernel filter
    #: is built from these names, so it sees the farm's kernels and not the input generators' kernels
    entry: str
    #: compile for the architecture-specific target (``sm_90a``: wgmma, setmaxnreg)
    arch_specific: bool = False

    def __init__(self, source: CudaSource) -> None:
        """
        Args:
            source: the template and the headers it includes, as NVRTC compiles them.
        """
        self.source = source

    def fingerprint(self) -> bytes:
        """What a measurement of this implementation depends on besides the config: its source
        and every header the source includes (part of the kernel's source hash)."""
        return self.source.fingerprint()

    @abstractmethod
    def defines(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, int | str]:
        """Compile-time macros (``-DNAME=value``) for this config and problem."""

    @abstractmethod
    def launch(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> Launch:
        """Grid, block and dynamic shared memory for this config and problem."""

    @abstractmethod
    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        """Fresh random inputs (never zeros) and the output buffer(s), by name."""

    @abstractmethod
    def arguments(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Sequence[Any]:
        """The kernel's argument list, in order."""

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

    def name_expression(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> str | None:
        """A C++ entry: the name expression NVRTC instantiates and lowers to the mangled name the
        cubin holds (``"matmul<float, 32>"``). None (the default): ``entry`` is an extern "C" name."""
        return None

    def constant_memory(self) -> Mapping[str, str]:
        """``__constant__`` symbol -> the input buffer copied into it before the kernel runs."""
        return {}

    def peak_kind(self, problem: Mapping[str, Any]) -> str:
        """Which compute ceiling applies: ``"fp32"`` (FFMA) or ``"tensor"`` (bf16/fp16 MMA)."""
        return "fp32"
