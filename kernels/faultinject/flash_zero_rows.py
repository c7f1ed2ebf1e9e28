"""A wrong-but-fast flash-attention: the real kernel, except that it stores zeros for a few query
rows of every head (the fault an independent re-measurement planted: 110 of 262,144 rows zeroed
passed the old norm-only check). It does all of the real kernel's work plus two comparisons per
stored row, so its speed is the real kernel's (not timed: it never gets past verification), and only
verification can keep it from becoming a job's best config.

Not in the registry; the GPU tests hand it to the cuda backend by reference (:data:`REF`). Its
source is flash_attention.cu with one line changed, made here at import time, so the real kernel's
source (and its cubins and source hash) stays untouched.
"""

from __future__ import annotations

from dataclasses import replace

from kernelfarm.core.space import Parameter, SearchSpace
from kernelfarm.kernels.cuda_source import CudaSource
from kernelfarm.kernels.flash_attention import spec as flash
from kernelfarm.kernels.spec import KernelSpec

REF = "kernelfarm.kernels.faultinject.flash_zero_rows:SPEC"

# The line that computes which query row a thread stores; the fault zeroes the row's inverse
# softmax sum for rows ZERO_AT, ZERO_AT + ZERO_EVERY, ... of each head, so those rows store zeros.
_ROW_LINE = "        const int r = (warp * MT + i) * 16 + g;\n"
_FAULT = (
    _ROW_LINE + "        if ((q0 + r) % ZERO_EVERY == ZERO_AT) inv[0] = 0.f;\n"
    "        if ((q0 + r + 8) % ZERO_EVERY == ZERO_AT) inv[1] = 0.f;\n"
)


def _faulty_source() -> CudaSource:
    real = flash.SPEC.impl("cuda", flash.FlashAttention).source
    if real.text.count(_ROW_LINE) != 1:
        raise RuntimeError("flash_attention.cu changed: the fault's anchor line is gone; update flash_zero_rows.py")
    return replace(real, name="flash_zero_rows.cu", text=real.text.replace(_ROW_LINE, _FAULT), path=None)


class FlashZeroRows(flash.FlashAttention):
    """Also defines ZERO_EVERY and ZERO_AT (config parameters of this variant)."""


SPEC = KernelSpec(
    name="flash_zero_rows",
    version=1,
    description="fault injection: flash attention with a few query rows of each head stored as zeros",
    space=SearchSpace(
        parameters=(
            *flash.SPACE.parameters,
            Parameter("ZERO_EVERY", (4096, 1 << 20)),  # 1 << 20: one row per head (rows 7 of each head)
            Parameter("ZERO_AT", (7,)),
        ),
        constraints=flash.SPACE.constraints,
        context_names=flash.SPACE.context_names,
    ),
    problem_params=flash.SPEC.problem_params,
    default_problem=flash.SPEC.default_problem,
    impls={"cuda": FlashZeroRows(_faulty_source())},
)
