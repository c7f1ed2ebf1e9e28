"""Softmax over the last dimension (fp32 or bf16 storage, fp32 arithmetic)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from kernelfarm.kernels.cuda_dtypes import from_float32, random_tensor, to_float32
from kernelfarm.kernels.cuda_source import CudaSource
from kernelfarm.kernels.rowwise import DEFAULT_PROBLEM, PROBLEM_PARAMS, SPACE, RowKernel
from kernelfarm.kernels.spec import KernelSpec


class Softmax(RowKernel):
    entry = "kf_softmax"
    norm_tolerance: ClassVar[Mapping[str, float]] = {"float32": 1e-6, "bfloat16": 2e-4}

    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        import cupy as cp

        m, n, dtype = int(problem["M"]), int(problem["N"]), str(problem["dtype"])
        return {
            "x": random_tensor((m, n), dtype, seed, scale=4.0, offset=0.5),
            "y": cp.empty((m, n), dtype=cp.uint16 if dtype == "bfloat16" else cp.float32),
        }

    def arguments(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Sequence[Any]:
        import numpy as np

        return (buffers["x"], buffers["y"], np.int32(problem["M"]))

    def reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        import cupy as cp

        dtype = str(problem["dtype"])
        x = to_float32(buffers["x"], dtype).astype(cp.float64)
        e = cp.exp(x - x.max(axis=1, keepdims=True))
        return {"y": from_float32((e / e.sum(axis=1, keepdims=True)).astype(cp.float32), dtype)}

    def flops(self, problem: Mapping[str, Any]) -> float:
        return 5.0 * int(problem["M"]) * int(problem["N"])

    def bytes_moved(self, problem: Mapping[str, Any]) -> float:
        return float(2 * int(problem["M"]) * int(problem["N"]) * self.element_bytes(problem))

    def input_set_bytes(self, problem: Mapping[str, Any]) -> int:
        return 3 * int(problem["M"]) * int(problem["N"]) * self.element_bytes(problem)  # x, y, the reference y


SPEC = KernelSpec(
    name="softmax",
    version=1,
    description="Softmax over the last dimension of an M x N tensor (fp32 or bf16; fp32 arithmetic)",
    space=SPACE,
    problem_params=PROBLEM_PARAMS,
    default_problem=DEFAULT_PROBLEM,
    impls={"cuda": Softmax(CudaSource.from_file(Path(__file__).with_name("softmax.cu")))},
    test_problems=({"M": 1000, "N": 2048, "dtype": "float32"}, {"M": 1000, "N": 2048, "dtype": "bfloat16"}),
)
