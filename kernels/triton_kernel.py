"""The "triton" implementation of a kernel: how the triton backend compiles, launches and checks it.

A Triton kernel folder keeps its ``@triton.jit`` functions in a module of their own (``jit.py``)
and declares ``impls={"triton": MyKernel("kernelfarm.kernels.<name>.jit", "kf_<name>")}`` in its
spec. The spec never imports that module: the catalogue loads on hosts without Triton (the API,
the coordinator, CPU tests); only the triton backend's compile processes, its measuring child and
the program ncu profiles import it.

What a config sets: the jit function's ``tl.constexpr`` parameters (:meth:`TritonKernel.constexprs`)
and Triton's compile options (``num_warps``, ``num_stages``, ``num_ctas``, ``maxnreg``) taken from
the config's parameters of those names. Every other parameter of the jit function is a runtime
argument (:meth:`TritonKernel.arguments`): a buffer (passed by pointer), an integer or a float, or
a :class:`TensorDescriptorArg` (a TMA descriptor built on the host). Its type for the compiler is
:meth:`TritonKernel.signature`. Methods that touch arrays run inside the measuring child (CuPy on
the current device); the rest are pure and run anywhere.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import math
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelfarm.kernels.gpu_kernel import GpuKernel

# Config parameters with these names are Triton compile options, not constexpr arguments.
OPTION_NAMES = ("num_warps", "num_stages", "num_ctas", "maxnreg")
DEFAULT_OPTIONS = {"num_warps": 4, "num_stages": 3}
# Triton's type names of the element types the catalogue uses ("*bf16" is a bf16 pointer).
TRITON_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


@dataclass(frozen=True)
class TensorDescriptorArg:
    """A host-side TMA tensor descriptor over one buffer (Triton's ``TensorDescriptor``): the
    backend builds it in the measuring child, so the spec names only the buffer and the shapes."""

    buffer: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    block_shape: tuple[int, ...]

    def triton_type(self, dtype: str) -> str:
        """The compiler's signature type, e.g. ``tensordesc<bf16[128, 64]>``."""
        return f"tensordesc<{TRITON_DTYPES[dtype]}[{', '.join(str(b) for b in self.block_shape)}]>"


@dataclass(frozen=True)
class Grid:
    """Programs per launch dimension (Triton's grid)."""

    x: int
    y: int = 1
    z: int = 1

    @property
    def dims(self) -> tuple[int, int, int]:
        return (self.x, self.y, self.z)

    @property
    def programs(self) -> int:
        return self.x * self.y * self.z


class TritonKernel(GpuKernel):
    """Args of every method: ``config`` is one point of the spec's search space, ``problem`` the
    normalized problem dict. Arrays are CuPy arrays on the current device (bf16 as uint16 bits).
    Inputs, reference, tolerance and roofline figures: :class:`~kernelfarm.kernels.gpu_kernel.GpuKernel`."""

    def __init__(self, module: str, function: str) -> None:
        """
        Args:
            module: the importable module that defines the ``@triton.jit`` function.
            function: its name; also the GPU kernel's name, which ncu's filter matches (``kf_*``).
        """
        self.module = module
        self.function = function

    def entry(self, config: Mapping[str, Any]) -> str:
        """The jit function this config runs (a kernel with several schedules picks one by config);
        also the compiled kernel's name on the GPU: Triton names a kernel after its function."""
        return self.function

    def entries(self) -> tuple[str, ...]:
        """Every jit function :meth:`entry` may name: what ncu's kernel filter matches."""
        return (self.function,)

    def source_path(self) -> Path:
        """The jit module's file, found without importing it (no Triton needed)."""
        found = importlib.util.find_spec(self.module)
        if found is None or found.origin is None:
            raise FileNotFoundError(f"no module {self.module!r}")
        return Path(found.origin)

    def source_text(self) -> str:
        return self.source_path().read_text()

    def fingerprint(self) -> bytes:
        """What a measurement depends on besides config and problem (part of the kernel's source
        hash): the jit module's text, and the text of the module defining this implementation
        class (its arguments, inputs and reference), with both names."""
        digest = hashlib.sha256(self.source_text().encode())
        implementation = Path(inspect.getfile(type(self)))
        digest.update(f"\0{self.module}:{self.function}\0{type(self).__qualname__}\0".encode())
        digest.update(implementation.read_bytes())
        return digest.digest()

    # ------------------------------------------------------------------ compile
    @abstractmethod
    def constexprs(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, int | float | bool]:
        """Values of the jit function's ``tl.constexpr`` parameters for this config and problem."""

    @abstractmethod
    def signature(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, str]:
        """Compiler types of the runtime arguments, by parameter name (``*bf16``, ``i32``, ``fp32``,
        ``tensordesc<...>``)."""

    def scalars(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, int]:
        """Integer arguments known from the problem alone (sizes, strides). The backend
        specializes on them as Triton's JIT would: a value of 1 becomes a constant, a multiple of
        16 is declared divisible by 16 (vectorized loads, pipelined copies)."""
        return {}

    def options(self, config: Mapping[str, Any]) -> dict[str, int]:
        """Triton compile options of this config (the config's parameters named like them)."""
        return DEFAULT_OPTIONS | {name: int(config[name]) for name in OPTION_NAMES if name in config}

    # ------------------------------------------------------------------ launch
    @abstractmethod
    def grid(self, config: Mapping[str, Any], problem: Mapping[str, Any], sm_count: int) -> Grid:
        """Programs to launch (a persistent kernel launches about one per SM: ``sm_count``)."""

    @abstractmethod
    def arguments(self, config: Mapping[str, Any], problem: Mapping[str, Any], sm_count: int) -> dict[str, Any]:
        """Runtime arguments by parameter name: a :class:`BufferArg` (a buffer of ``make_inputs``,
        passed by pointer), a number, or a :class:`TensorDescriptorArg`. Pure: the backend binds
        the buffers."""


@dataclass(frozen=True)
class BufferArg:
    """A runtime argument that is one of the buffers made by ``make_inputs`` (passed by pointer)."""

    buffer: str


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_power_of_two(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, n))))
