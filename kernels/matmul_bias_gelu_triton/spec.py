"""Triton fused matrix product, bias and GELU: Y = GELU(A @ B + bias), bf16 or fp16, in one kernel: the
product never goes to memory before its epilogue.

``gelu`` picks the GELU: ``"erf"`` (the exact one, ``F.gelu(x @ W + b)``, the default) or ``"tanh"``
(its tanh approximation, ``F.gelu(..., approximate="tanh")``: GPT-2's ``gelu_new``). The parameter came
after erf problems were stored, so an erf problem's key is the one it had without it.

The same two schedules and space as ``matmul_triton`` (its jit functions with ``EPILOGUE`` 1 for erf,
2 for tanh); the default problem is GPT-2 small's MLP up-projection, 4096 tokens x 768 -> 3072.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernelfarm.kernels.cuda_dtypes import ELEMENT_BYTES
from kernelfarm.kernels.matmul_triton.spec import JIT_MODULE, PROBLEM_PARAMS, SPACE, TritonMatmul
from kernelfarm.kernels.spec import KernelSpec, ProblemParam

GELUS = ("erf", "tanh")
# jit EPILOGUE constexpr per GELU form (0 is matmul_triton's plain product)
EPILOGUES = {"erf": 1, "tanh": 2}
SQRT_2_OVER_PI = 0.7978845608028654


class TritonMatmulBiasGelu(TritonMatmul):
    EPILOGUE = 1

    def epilogue(self, problem: Mapping[str, Any]) -> int:
        return EPILOGUES[str(problem.get("gelu", "erf"))]

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
        return {"C": from_float32(gelu(z, str(problem.get("gelu", "erf")), cp, erf).astype(cp.float32), dtype)}

    def flops(self, problem: Mapping[str, Any]) -> float:
        m, n = int(problem["M"]), int(problem["N"])
        return super().flops(problem) + 10.0 * m * n  # bias add and GELU, roughly

    def bytes_moved(self, problem: Mapping[str, Any]) -> float:
        return super().bytes_moved(problem) + ELEMENT_BYTES[str(problem["dtype"])] * int(problem["N"])

    def input_set_bytes(self, problem: Mapping[str, Any]) -> int:
        return super().input_set_bytes(problem) + ELEMENT_BYTES[str(problem["dtype"])] * int(problem["N"])  # bias


def gelu(z: Any, form: str, xp: Any, erf: Any) -> Any:
    """GELU of ``z`` in the given form, in ``z``'s own precision (float64 for the reference); ``xp`` is
    its array module (NumPy, CuPy), ``erf`` that module's error function (only the erf form calls it)."""
    if form == "tanh":
        return 0.5 * z * (1.0 + xp.tanh(SQRT_2_OVER_PI * (z + 0.044715 * z**3)))
    return 0.5 * z * (1.0 + erf(z / 2.0**0.5))


SPEC = KernelSpec(
    name="matmul_bias_gelu_triton",
    version=1,
    description="Y = GELU(A @ B + bias) in one Triton kernel (erf GELU as F.gelu(x @ W + b), or its tanh "
    "approximation, GPT-2's gelu_new), bf16/fp16, fp32 accumulation; tiled or persistent with TMA descriptors",
    space=SPACE,
    problem_params=(*PROBLEM_PARAMS, ProblemParam("gelu", kind="str", choices=GELUS, key_default="erf")),
    default_problem={"M": 4096, "N": 3072, "K": 768, "dtype": "bfloat16", "b_layout": "kn", "gelu": "erf"},
    impls={"triton": TritonMatmulBiasGelu(JIT_MODULE, "kf_triton_matmul")},
    test_problems=(
        {"M": 1000, "N": 776, "K": 520, "dtype": "bfloat16", "b_layout": "kn"},
        {"M": 333, "N": 1024, "K": 768, "dtype": "float16", "b_layout": "nk"},
        # GPT-2's MLP form: tanh GELU, W stored K x N (Conv1D); N, K multiples of 8 so TMA configs run too,
        # M ragged for the masked tail
        {"M": 300, "N": 1024, "K": 256, "dtype": "bfloat16", "b_layout": "kn", "gelu": "tanh"},
    ),
)
