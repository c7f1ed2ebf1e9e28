"""The "cuda" implementation of a kernel: how the cuda backend compiles, launches and checks it.

Each CUDA kernel folder implements this class next to its ``.cu`` template and declares it as
``impls={"cuda": MyKernel(CudaSource.from_file(...))}`` in its spec. The worker's cuda backend only
talks to this interface, so adding a kernel never touches the worker. Methods that touch arrays run
inside the measuring child process (CuPy on the current device); ``defines``, ``launch``, ``flops``
and ``bytes_moved`` are pure and run anywhere.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kernelfarm.kernels.cuda_source import CudaSource
from kernelfarm.kernels.gpu_kernel import GpuKernel


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


class CudaKernel(GpuKernel):
    """Args of every method: ``config`` is one point of the spec's search space, ``problem`` the
    normalized problem dict. Arrays are CuPy arrays on the current device. Inputs, reference,
    tolerance and roofline figures: :class:`~kernelfarm.kernels.gpu_kernel.GpuKernel`."""

    #: name of the ``extern "C" __global__`` function in the template; the profiler's kernel filter
    #: is built from these names, so it sees the farm's kernels and not the input generators' kernels
    entry: str
    #: compile for the architecture-specific target (``sm_90a``: wgmma, setmaxnreg)
    arch_specific: bool = False
    #: NVRTC options of the kernel's own, after the farm's (code generation only, each one whole option:
    #: kernels/manifest/model.py WHOLE_COMPILER_OPTION); a ``-std=`` one replaces the farm's ``-std=c++17``
    compile_options: tuple[str, ...] = ()

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
    def arguments(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Sequence[Any]:
        """The kernel's argument list, in order."""

    def name_expression(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> str | None:
        """A C++ entry: the name expression NVRTC instantiates and lowers to the mangled name the
        cubin holds (``"matmul<float, 32>"``). None (the default): ``entry`` is an extern "C" name."""
        return None

    def constant_memory(self) -> Mapping[str, str]:
        """``__constant__`` symbol -> the input buffer copied into it before the kernel runs."""
        return {}
