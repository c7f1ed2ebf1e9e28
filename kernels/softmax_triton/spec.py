"""Triton softmax over the last dimension of an M x N tensor (fp32 or bf16 storage, fp32 arithmetic).

Inputs, reference and tolerance are the CUDA softmax's (``kernels/softmax``); the jit function is
in ``kernels/triton_jit/rows.py``.
"""

from __future__ import annotations

from kernelfarm.kernels.rowwise import DEFAULT_PROBLEM, PROBLEM_PARAMS
from kernelfarm.kernels.softmax.spec import SPEC as CUDA_SOFTMAX
from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.kernels.triton_rows import ROW_SPACE, TritonRowKernel


class TritonSoftmax(TritonRowKernel):
    def pointer_names(self) -> tuple[str, ...]:
        return ("x_ptr", "y_ptr")

    def buffer_names(self) -> tuple[str, ...]:
        return ("x", "y")


SPEC = KernelSpec(
    name="softmax_triton",
    version=1,
    description="Row softmax of an M x N tensor in Triton (fp32 or bf16; fp32 arithmetic)",
    space=ROW_SPACE,
    problem_params=PROBLEM_PARAMS,
    default_problem=DEFAULT_PROBLEM,
    impls={"triton": TritonSoftmax("kernelfarm.kernels.triton_jit.rows", "kf_triton_softmax", CUDA_SOFTMAX)},
    test_problems=({"M": 1000, "N": 4000, "dtype": "float32"}, {"M": 999, "N": 768, "dtype": "bfloat16"}),
)
