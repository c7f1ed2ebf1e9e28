"""Output poisoning and the relative-error check against a reference.

Shared by every GPU backend: the measuring child poisons a kernel's outputs before its verifying run
and compares them with the reference of the kernel's implementation afterwards.
"""

from __future__ import annotations

import math
from typing import Any


def poison(array: Any) -> None:
    """Fill with all-ones bytes: NaN for every float type, so an unwritten element fails the check."""
    array.view("uint8").fill(0xFF)


def relative_error(out: Any, ref: Any) -> float:
    """||out - ref|| / ||ref|| in float64 on the device; NaN/inf anywhere gives inf."""
    import cupy as cp

    a = _as_float(out).astype(cp.float64).ravel()
    b = _as_float(ref).astype(cp.float64).ravel()
    if a.shape != b.shape:
        return math.inf
    if not bool(cp.isfinite(a).all()):
        return math.inf
    denominator = float(cp.linalg.norm(b))
    error = float(cp.linalg.norm(a - b))
    return error / denominator if denominator > 0 else error


def _as_float(array: Any) -> Any:
    """bf16 is stored as uint16 (CuPy has no bfloat16): widen it to float32 by a shift."""
    import cupy as cp

    if array.dtype == cp.uint16:
        return (array.astype(cp.uint32) << 16).view(cp.float32)
    return array
