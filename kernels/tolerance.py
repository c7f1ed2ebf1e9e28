"""How far a kernel's output may be from its reference: a norm bound and an element-wise bound.

Each CUDA kernel's ``tolerance(problem)`` returns a :class:`Tolerance`; the measuring child's verifier
(``worker/measuring/verifier.py``) fails a config that breaks either bound.

- ``norm``: ||out - ref||_2 / ||ref||_2 over the whole output. Set per kernel from the errors measured
  on correct configs (docs/benchmarks/GPU.md, "Tolerances": 5-10 times the worst error any correct
  config showed, on two input seeds; flash attention 2 times, its error being the bf16 rounding of
  the probabilities, the same in every config).
- ``element``: max_i |out_i - ref_i| / (|ref_i| + rms(ref)). Derived from the output's dtype and the
  reduction length by :meth:`Tolerance.derived`: the output and the reference are each rounded to the
  output's dtype (so they may differ by one unit in the last place, 2u relative), and summing L terms
  in a different order than the reference drifts by about u·sqrt(L) of the output's scale (random
  rounding errors add like a random walk). A wrong element (a zeroed row, a skipped tile, a stale
  value) misses by about the element's own size, so its error is near 1/2 or more, far above either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Unit roundoff (half the spacing of numbers near 1) of each dtype the kernels store or compute in.
UNIT_ROUNDOFF = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
}

# How many times the expected drift of a reduction the element bound allows: the bound is a maximum
# over millions of elements (about 5.5 standard deviations at 16M) of a sum whose own error is a
# fraction of u·sqrt(L), and must never fail a correct config.
DEFAULT_MARGIN = 8.0


@dataclass(frozen=True)
class Tolerance:
    """Attributes:
    norm: the largest relative-L2 error accepted.
    element: the largest element error accepted, each element relative to its own size plus the
        output's rms (see the module docstring).
    """

    norm: float
    element: float

    def __post_init__(self) -> None:
        if not (self.norm > 0 and self.element > 0):
            raise ValueError(f"tolerances must be positive: {self}")

    @classmethod
    def derived(
        cls,
        norm: float,
        output: str,
        reduction_length: int,
        *,
        arithmetic: str = "float32",
        operand_rounding: str | None = None,
        margin: float = DEFAULT_MARGIN,
    ) -> Tolerance:
        """A tolerance whose element bound follows from the dtypes and the reduction length.

        Args:
            norm: the norm bound (set from measured errors; the norm of a correct output is smooth in
                the problem, so one measured value per kernel and dtype carries over).
            output: the dtype the kernel stores (and the reference is rounded to).
            reduction_length: how many terms each output element sums (K of a matrix product, the
                filter taps times channels of a convolution, the row length of softmax/layernorm).
            arithmetic: the dtype the kernel accumulates in.
            operand_rounding: a dtype an intermediate is rounded to before it is used again
                (flash attention's probabilities, rounded to bf16 for the second product), or None.
            margin: multiple of the expected drift allowed (:data:`DEFAULT_MARGIN`).
        """
        drift = UNIT_ROUNDOFF[arithmetic] * math.sqrt(max(1, reduction_length))
        if operand_rounding is not None:
            drift += UNIT_ROUNDOFF[operand_rounding]
        return cls(norm=norm, element=2 * UNIT_ROUNDOFF[output] + margin * drift)
