"""Shared pieces of the row-wise kernels (layernorm, softmax): one search space, one launch rule.

A row of N elements is handled by TPR = THREADS / ROWS threads (whole warps), ROWS rows per block,
VEC elements per vector access (32-byte vectors as two 16-byte accesses), the row kept in registers (KEEP) or re-read
through L2, with optional streaming cache hints on loads and stores.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kernelfarm.core.space import Parameter, SearchSpace
from kernelfarm.kernels.cuda_dtypes import ELEMENT_BYTES
from kernelfarm.kernels.cuda_kernel import CudaKernel, Launch
from kernelfarm.kernels.spec import ProblemParam
from kernelfarm.kernels.tolerance import Tolerance

DTYPES = ("float32", "bfloat16")
PROBLEM_PARAMS = (
    ProblemParam("M", minimum=1, maximum=1 << 24),
    ProblemParam("N", minimum=32, maximum=1 << 16),
    ProblemParam("dtype", kind="str", choices=DTYPES),
)
DEFAULT_PROBLEM = {"M": 8192, "N": 4096, "dtype": "float32"}

SPACE = SearchSpace(
    parameters=(
        Parameter("THREADS", (32, 64, 128, 256, 512, 1024)),
        Parameter("ROWS", (1, 2, 4, 8, 16)),
        Parameter("VEC", (1, 2, 4, 8)),
        Parameter("KEEP", (0, 1)),
        Parameter("LOAD_CS", (0, 1)),
        Parameter("STORE_CS", (0, 1)),
    ),
    constraints=(
        "THREADS // ROWS >= 32",
        "N % (THREADS // ROWS * VEC) == 0",
        # the row lives in registers: at most 64 floats per thread, or it spills
        "KEEP == 0 or N // (THREADS // ROWS) <= 64",
    ),
    context_names=frozenset({"M", "N", "dtype"}),
)


class RowKernel(CudaKernel):
    """Common launch, defines and bytes of a row-wise kernel; subclasses add inputs and reference."""

    def defines(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, int | str]:
        return {
            "IS_BF16": int(problem["dtype"] == "bfloat16"),
            "N": int(problem["N"]),
            **{name: int(config[name]) for name in ("THREADS", "ROWS", "VEC", "KEEP", "LOAD_CS", "STORE_CS")},
        }

    def launch(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> Launch:
        rows = int(config["ROWS"])
        return Launch(grid=((int(problem["M"]) + rows - 1) // rows, 1, 1), block=(int(config["THREADS"]), 1, 1))

    def outputs(self) -> tuple[str, ...]:
        return ("y",)

    #: relative-L2 bound per dtype, set per kernel from measured errors (docs/benchmarks/GPU.md)
    norm_tolerance: ClassVar[Mapping[str, float]] = {"float32": 1e-6, "bfloat16": 1e-4}

    def tolerance(self, problem: Mapping[str, Any]) -> Tolerance:
        dtype = str(problem["dtype"])
        return Tolerance.derived(self.norm_tolerance[dtype], dtype, int(problem["N"]))

    def element_bytes(self, problem: Mapping[str, Any]) -> int:
        return ELEMENT_BYTES[str(problem["dtype"])]
