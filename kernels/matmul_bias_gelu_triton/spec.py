"""Triton fused matrix product, bias and GELU: Y = GELU(A @ B + bias), exactly ``F.gelu(x @ W + b)``
(erf GELU), bf16 or fp16, in one kernel: the product never goes to memory before its epilogue.

The same two schedules and space as ``matmul_triton`` (its jit functions with ``EPILOGUE=1``); the
default problem is GPT-2 small's MLP up-projection, 4096 tokens x 768 -> 3072.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernelfarm.kernels.cuda_dtypes import ELEMENT_BYTES
from kernelfarm.kernels.matmul_triton.spec import JIT_MODULE, PROBLEM_PARAMS, SPACE, TritonMatmul
from kernelfarm.kernels.spec import KernelSpec


class TritonMatmulBiasGelu(TritonMatmul):
    EPILOGUE = 1

    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        from kernelfarm.kernels.cuda_dtypes import random_tensor

        return super().make_inputs(problem, seed) | {
            "bias": random_tensor((int(problem["N"]),), str(problem["dtype"]), seed + 2, scale=0.5)
        }

    def reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        import cupy as cp
        from cupyx.scipy.special import erf

        from kernelfarm.kernels.cuda_dtypes import from_float32, to_float32

        dtype = str(problem["dtype"])
        z = (self.product(buffers, problem) + to_float32(buffers["bias"], dtype)[None, :]).astype(cp.float64)
        y = 0.5 * z * (1.0 + erf(z / cp.sqrt(2.0)))
        return {"C": from_float32(y.astype(cp.float32), dtype)}

    def flops(self, problem: Mapping[str, Any]) -> float:
        m, n = int(problem["M"]), int(problem["N"])
        return super().flops(problem) + 10.0 * m * n  # bias add and GELU, roughly

    def bytes_moved(self, problem: Mapping[str, Any]) -> float:
        return super().bytes_moved(problem) + ELEMENT_BYTES[str(problem["dtype"])] * int(problem["N"])


SPEC = KernelSpec(
    name="matmul_bias_gelu_triton",
    version=1,
    description="Y = GELU(A @ B + bias) in one Triton kernel (erf GELU, as F.gelu(x @ W + b)), bf16/fp16, "
    "fp32 accumulation; tiled or persistent with TMA descriptors",
    space=SPACE,
    problem_params=PROBLEM_PARAMS,
    default_problem={"M": 4096, "N": 3072, "K": 768, "dtype": "bfloat16", "b_layout": "kn"},
    impls={"triton": TritonMatmulBiasGelu(JIT_MODULE, "kf_triton_matmul")},
    test_problems=(
        {"M": 1000, "N": 776, "K": 520, "dtype": "bfloat16", "b_layout": "kn"},
        {"M": 333, "N": 1024, "K": 768, "dtype": "float16", "b_layout": "nk"},
    ),
)
