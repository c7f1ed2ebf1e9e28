"""Which farm kernel can run a profiled operator, and with which problem.

An operator maps to a *family* (matmul, layernorm, softmax, attention) and a problem in the farm's
parameter names; the farm kernels of a family are tried in order of preference, and the first one the
farm offers whose problem signature accepts the problem is chosen. A pair of modules the fused kernel runs
(an MLP's up-projection and its GELU: model_profiler/fusion.py) is the family ``matmul_bias_gelu``.
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
    ("matmul", "bfloat16"): ("matmul_triton", "matmul_bf16_wgmma", "matmul_bf16"),
    ("matmul", "float16"): ("matmul_triton",),
    ("matmul", "float32"): ("matmul_fp32",),
    ("layernorm", "bfloat16"): ("layernorm_triton", "layernorm"),
    ("layernorm", "float32"): ("layernorm_triton", "layernorm"),
    ("softmax", "bfloat16"): ("softmax_triton", "softmax"),
    ("softmax", "float32"): ("softmax_triton", "softmax"),
    ("attention", "bfloat16"): ("flash_attention",),
    ("attention", "float16"): ("flash_attention",),
    # an MLP's up-projection and its GELU in one kernel (model_profiler/fusion.py finds them)
    ("matmul_bias_gelu", "bfloat16"): ("matmul_bias_gelu_triton",),
    ("matmul_bias_gelu", "float16"): ("matmul_bias_gelu_triton",),
}
# What a kernel computes beyond its problem parameters: the CUDA bf16 products are A @ B^T (B stored
# N x K, as a Linear's weight), the fp32 one A @ B (B stored K x N).
REQUIRES: dict[str, dict[str, Any]] = {
    "matmul_bf16": {"b_layout": "nk"},
    "matmul_bf16_wgmma": {"b_layout": "nk"},
    "matmul_fp32": {"b_layout": "kn"},
}
# TMA (Hopper's bulk tensor copies, matmul_triton's persistent schedule) needs 16-byte aligned rows: an N
# that is not a multiple of 8 (GPT-2's vocabulary, 50257) rules it out and leaves only the tiled schedule.
# For matmul_triton the farm therefore tunes N rounded up to this; the swap pads the weight with zero
# rows (or columns) once and hands on a view of the first N output columns.
PAD_N_TO = 8
PADDABLE = frozenset({"matmul_triton"})
# Where the B operand is among an operator's inputs.
B_OPERAND = {"aten::mm": 1, "aten::addmm": 2, "aten::matmul": 1}


@dataclass(frozen=True)
class Mapping_:
    family: str
    # Everything known about the problem (dtype, b_layout included); each kernel takes its own part.
    problem: dict[str, Any]


def b_layout(op: OperatorReport) -> str:
    """``"nk"`` when B (K x N) is the transpose of an N x K tensor (a Linear's weight), else ``"kn"``.

    From the recorded strides where there are some: a K x N operand with strides (1, K) is stored
    N x K. Without strides, a Linear's weight is N x K and anything else is taken as K x N.
    """
    if op.name == "aten::linear":
        return "nk"
    index = B_OPERAND.get(op.name)
    if op.input_strides and index is not None and index < len(op.input_strides):
        strides = op.input_strides[index]
        if len(strides) == 2 and strides[0] == 1 and strides[1] != 1:
            return "nk"
    return "kn"


def family_problem(op: OperatorReport, dtype: str) -> Mapping_ | None:
    """The family and problem of one operator, or None when the farm has no kernel of its kind."""
    shapes = op.input_shapes
    if op.name in MATMUL_OPS:
        gemm = gemm_shape(op.name, shapes)
        if gemm is None or gemm.batch != 1:
            return None
        return Mapping_("matmul", {"M": gemm.m, "N": gemm.n, "K": gemm.k, "dtype": dtype, "b_layout": b_layout(op)})
    if op.name in NORM_OPS and shapes and shapes[0]:
        x = shapes[0]
        return Mapping_("layernorm", {"M": math.prod(x[:-1]), "N": x[-1], "dtype": dtype})
    if op.name in SOFTMAX_OPS and shapes and shapes[0]:
        x = shapes[0]
        return Mapping_("softmax", {"M": math.prod(x[:-1]), "N": x[-1], "dtype": dtype})
    if op.name in ATTENTION_OPS and (a := attention_shape(op.name, shapes)) is not None and a.seq_q == a.seq_k:
        return Mapping_("attention", {"B": a.batch, "H": a.heads, "S": a.seq_q, "D": a.dim, "causal": 1})
    return None


def problem_for(kernel: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any] | None:
    """The part of ``problem`` a kernel of /v1/kernels takes, or None when it cannot run it (a parameter
    it needs is unknown, a value is outside its bounds, or it computes another layout)."""
    for name, value in REQUIRES.get(kernel["name"], {}).items():
        if problem.get(name) != value:
            return None
    names = [p["name"] for p in kernel.get("problem_params", [])]
    if not set(names) <= set(problem):
        return None
    own = {name: problem[name] for name in names}
    if kernel["name"] in PADDABLE and own.get("N", 0) % PAD_N_TO and own.get("K", 0) % PAD_N_TO == 0:
        own["N"] = -(-own["N"] // PAD_N_TO) * PAD_N_TO
    return own if accepts(kernel, own) else None


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
) -> list[tuple[str, dict[str, Any]]]:
    """The farm kernels that can run ``problem``, best first, each with its own problem (empty when none)."""
    by_name = {k["name"]: k for k in offered}
    chosen = []
    for name in CANDIDATES.get((family, dtype), ()):
        own = problem_for(by_name[name], problem) if name in by_name else None
        if own is not None:
            chosen.append((name, own))
    return chosen
