"""LayerNorm over the last dimension (fp32 or bf16 storage, fp32 statistics)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from kernelfarm.kernels.cuda_dtypes import from_float32, random_tensor, to_float32
from kernelfarm.kernels.cuda_source import CudaSource
from kernelfarm.kernels.rowwise import DEFAULT_PROBLEM, PROBLEM_PARAMS, SPACE, RowKernel
from kernelfarm.kernels.spec import KernelSpec

EPS = 1e-5


class LayerNorm(RowKernel):
    entry = "kf_layernorm"
    norm_tolerance: ClassVar[Mapping[str, float]] = {"float32": 5e-7, "bfloat16": 1e-4}

    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        import cupy as cp

        m, n, dtype = int(problem["M"]), int(problem["N"]), str(problem["dtype"])
        return {
            "x": random_tensor((m, n), dtype, seed, scale=2.0, offset=0.5),
            "gamma": random_tensor((n,), dtype, seed + 1, scale=0.5, offset=1.0),
            "beta": random_tensor((n,), dtype, seed + 2, scale=0.5),
            "y": cp.empty((m, n), dtype=cp.uint16 if dtype == "bfloat16" else cp.float32),
        }

    def arguments(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Sequence[Any]:
        import numpy as np

        return (
            buffers["x"],
            buffers["gamma"],
            buffers["beta"],
            buffers["y"],
            np.int32(problem["M"]),
            np.float32(EPS),
        )

    def reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        import cupy as cp

        dtype = str(problem["dtype"])
        x = to_float32(buffers["x"], dtype).astype(cp.float64)
        mean = x.mean(axis=1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
        y = (x - mean) / cp.sqrt(var + EPS) * to_float32(buffers["gamma"], dtype) + to_float32(buffers["beta"], dtype)
        return {"y": from_float32(y.astype(cp.float32), dtype)}

    def flops(self, problem: Mapping[str, Any]) -> float:
        return 8.0 * int(problem["M"]) * int(problem["N"])

    def bytes_moved(self, problem: Mapping[str, Any]) -> float:
        m, n = int(problem["M"]), int(problem["N"])
        return float((2 * m * n + 2 * n) * self.element_bytes(problem))

    def input_set_bytes(self, problem: Mapping[str, Any]) -> int:
        m, n = int(problem["M"]), int(problem["N"])
        return (3 * m * n + 2 * n) * self.element_bytes(problem)  # x, gamma, beta, y and the reference y


SPEC = KernelSpec(
    name="layernorm",
    version=1,
    description="LayerNorm over the last dimension of an M x N tensor (fp32 or bf16; fp32 statistics)",
    space=SPACE,
    problem_params=PROBLEM_PARAMS,
    default_problem=DEFAULT_PROBLEM,
    impls={"cuda": LayerNorm(CudaSource.from_file(Path(__file__).with_name("layernorm.cu")))},
    test_problems=({"M": 1000, "N": 4096, "dtype": "float32"}, {"M": 1000, "N": 4096, "dtype": "bfloat16"}),
)
