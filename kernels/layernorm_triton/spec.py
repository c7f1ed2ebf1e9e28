"""Triton LayerNorm over the last dimension of an M x N tensor (fp32 or bf16 storage, fp32 statistics).

Inputs, reference and tolerance are the CUDA layernorm's (``kernels/layernorm``); the jit function
is in ``kernels/triton_jit/rows.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernelfarm.kernels.layernorm.spec import EPS
from kernelfarm.kernels.layernorm.spec import SPEC as CUDA_LAYERNORM
from kernelfarm.kernels.rowwise import DEFAULT_PROBLEM, PROBLEM_PARAMS
from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.kernels.triton_rows import ROW_SPACE, TritonRowKernel


class TritonLayerNorm(TritonRowKernel):
    def pointer_names(self) -> tuple[str, ...]:
        return ("x_ptr", "gamma_ptr", "beta_ptr", "y_ptr")

    def buffer_names(self) -> tuple[str, ...]:
        return ("x", "gamma", "beta", "y")

    def signature(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, str]:
        return super().signature(config, problem) | {"eps": "fp32"}

    def arguments(self, config: Mapping[str, Any], problem: Mapping[str, Any], sm_count: int) -> dict[str, Any]:
        return super().arguments(config, problem, sm_count) | {"eps": EPS}


SPEC = KernelSpec(
    name="layernorm_triton",
    version=1,
    description="LayerNorm over the last dimension of an M x N tensor in Triton (fp32 or bf16; fp32 statistics)",
    space=ROW_SPACE,
    problem_params=PROBLEM_PARAMS,
    default_problem=DEFAULT_PROBLEM,
    impls={"triton": TritonLayerNorm("kernelfarm.kernels.triton_jit.rows", "kf_triton_layernorm", CUDA_LAYERNORM)},
    test_problems=({"M": 1000, "N": 4000, "dtype": "float32"}, {"M": 999, "N": 768, "dtype": "bfloat16"}),
)
