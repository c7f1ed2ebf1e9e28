"""bf16 on CuPy: CuPy has no bfloat16 dtype, so bf16 tensors are uint16 arrays of the raw bits.

Conversions round to nearest even, like the hardware's ``cvt.rn.bf16.f32``.
"""

from __future__ import annotations

from typing import Any

ELEMENT_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def bf16_from_float32(x: Any) -> Any:
    import cupy as cp

    bits = cp.ascontiguousarray(x, dtype=cp.float32).view(cp.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    return ((bits + rounding) >> 16).astype(cp.uint16)


def bf16_to_float32(x: Any) -> Any:
    import cupy as cp

    return (x.astype(cp.uint32) << 16).view(cp.float32)


def random_tensor(shape: tuple[int, ...], dtype: str, seed: int, scale: float = 1.0, offset: float = 0.0) -> Any:
    """Uniform random values in [offset - scale, offset + scale), never all zeros, in ``dtype``
    (bf16 as uint16 bits)."""
    import cupy as cp

    rng = cp.random.default_rng(seed)
    values = (rng.random(shape, dtype=cp.float32) * 2.0 - 1.0) * scale + offset
    if dtype == "bfloat16":
        return bf16_from_float32(values)
    return values.astype(dtype)


def to_float32(x: Any, dtype: str) -> Any:
    import cupy as cp

    return bf16_to_float32(x) if dtype == "bfloat16" else x.astype(cp.float32)


def from_float32(x: Any, dtype: str) -> Any:
    return bf16_from_float32(x) if dtype == "bfloat16" else x.astype(dtype)
