"""Which farm kernel can run a profiled operator, and with which problem.

An operator maps to a *family* (matmul, layernorm, softmax, attention) and a problem in the farm's
parameter names; the farm kernels of a family are tried in order of preference, and the first one the
farm offers whose problem signature accepts the problem is chosen.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kernelfarm.model_profiler.analysis import OperatorReport
from kernelfarm.model_profiler.estimate import (
    ATTENTION_OPS,
    MATMUL_OPS,
    NORM_OPS,
    SOFTMAX_OPS,
    attention_shape,
    gemm_shape,
)

# Farm kernels per family and dtype, best first. Triton kernels take any shape (masked tails); the
# CUDA ones need tile multiples and are refused by the farm when the shape does not fit.
CANDIDATES: dict[tuple[str, str], tuple[str, ...]] = {
    ("matmul", "bfloat16"): ("triton_matmul_bf16", "matmul_bf16_wgmma", "matmul_bf16"),
    ("matmul", "float16"): ("triton_matmul_fp16",),
    ("matmul", "float32"): ("matmul_fp32",),
    ("layernorm", "bfloat16"): ("triton_layernorm", "layernorm"),
    ("layernorm", "float32"): ("triton_layernorm", "layernorm"),
    ("softmax", "bfloat16"): ("triton_softmax", "softmax"),
    ("softmax", "float32"): ("triton_softmax", "softmax"),
    ("attention", "bfloat16"): ("flash_attention",),
    ("attention", "float16"): ("flash_attention",),
}


@dataclass(frozen=True)
class Mapping_:
    family: str
    problem: dict[str, Any]  # in the farm's parameter names, dtype included where the kernel takes one


def family_problem(op: OperatorReport, dtype: str) -> Mapping_ | None:
    """The family and problem of one operator, or None when the farm has no kernel of its kind."""
    shapes = op.input_shapes
    if op.name in MATMUL_OPS:
        gemm = gemm_shape(op.name, shapes)
        if gemm is None or gemm.batch != 1:
            return None
        return Mapping_("matmul", {"M": gemm.m, "N": gemm.n, "K": gemm.k})
    if op.name in NORM_OPS and shapes and shapes[0]:
        x = shapes[0]
        return Mapping_("layernorm", {"M": math.prod(x[:-1]), "N": x[-1], "dtype": dtype})
    if op.name in SOFTMAX_OPS and shapes and shapes[0]:
        x = shapes[0]
        return Mapping_("softmax", {"M": math.prod(x[:-1]), "N": x[-1], "dtype": dtype})
    if op.name in ATTENTION_OPS and (a := attention_shape(op.name, shapes)) is not None and a.seq_q == a.seq_k:
        return Mapping_("attention", {"B": a.batch, "H": a.heads, "S": a.seq_q, "D": a.dim, "causal": 1})
    return None


def accepts(kernel: Mapping[str, Any], problem: Mapping[str, Any]) -> bool:
    """Whether a kernel of /v1/kernels takes ``problem``: same names, values within its bounds."""
    params = {p["name"]: p for p in kernel.get("problem_params", [])}
    if set(params) != set(problem):
        return False
    for name, value in problem.items():
        p = params[name]
        if p.get("choices") is not None and value not in p["choices"]:
            return False
        if isinstance(value, int) and not p.get("minimum", 1) <= value <= p.get("maximum", 1 << 62):
            return False
    return True


def choose_kernels(
    family: str, dtype: str, problem: Mapping[str, Any], offered: Sequence[Mapping[str, Any]]
) -> list[str]:
    """The farm kernels that can run ``problem``, best first (empty when none)."""
    by_name = {k["name"]: k for k in offered}
    return [name for name in CANDIDATES.get((family, dtype), ()) if name in by_name and accepts(by_name[name], problem)]
