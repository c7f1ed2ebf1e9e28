"""The farm's built-in references for manifest kernels: computed in float64 with CuPy, then cast to
the output's dtype. Run only inside the measuring child (arrays on the current device).

Operands are the manifest's buffers as declared (their ``shape``): the manifest maps each operand
to an argument in ``reference.inputs``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any


def matmul(ops: Mapping[str, Any], options: Mapping[str, Any]) -> Any:
    """``a @ b`` (2-D, or batched over leading dimensions)."""
    return ops["a"].astype("float64") @ ops["b"].astype("float64")


def softmax(ops: Mapping[str, Any], options: Mapping[str, Any]) -> Any:
    """Softmax over the last axis."""
    x = ops["x"].astype("float64")
    shifted = x - x.max(axis=-1, keepdims=True)
    exp = _cp().exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def layernorm(ops: Mapping[str, Any], options: Mapping[str, Any]) -> Any:
    """Normalization over the last axis, times ``weight`` plus ``bias`` when given (``eps`` option)."""
    x = ops["x"].astype("float64")
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out = (x - mean) / _cp().sqrt(var + float(options.get("eps", 1e-5)))
    if "weight" in ops:
        out = out * ops["weight"].astype("float64")
    if "bias" in ops:
        out = out + ops["bias"].astype("float64")
    return out


def conv2d(ops: Mapping[str, Any], options: Mapping[str, Any]) -> Any:
    """ "Valid" cross-correlation (no padding, stride 1): a 2-D image (H+R-1, W+S-1) with an (R, S)
    filter, or NCHW input with a KCRS filter."""
    cp = _cp()
    image, weight = ops["input"].astype("float64"), ops["weight"].astype("float64")
    if image.ndim == 2:
        image, weight = image[None, None], weight[None, None]
        squeeze = True
    else:
        squeeze = False
    n, _, h_in, w_in = image.shape
    k, _, r, s = weight.shape
    h, w = h_in - r + 1, w_in - s + 1
    out = cp.zeros((n, k, h, w), dtype=cp.float64)
    for i in range(r):
        for j in range(s):
            window = image[:, :, i : i + h, j : j + w]  # n c h w
            out += cp.einsum("nchw,kc->nkhw", window, weight[:, :, i, j])
    return out[0, 0] if squeeze else out


def attention(ops: Mapping[str, Any], options: Mapping[str, Any]) -> Any:
    """``softmax(q k^T * scale) v`` over the last two axes (``scale`` default 1/sqrt(d); ``causal``)."""
    cp = _cp()
    q, k, v = (ops[name].astype("float64") for name in ("q", "k", "v"))
    scale = float(options.get("scale", 1.0 / math.sqrt(q.shape[-1])))
    scores = q @ k.swapaxes(-1, -2) * scale
    if options.get("causal"):
        rows, cols = scores.shape[-2:]
        mask = cp.triu(cp.ones((rows, cols), dtype=bool), k=1 + cols - rows)
        scores = cp.where(mask, -cp.inf, scores)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = cp.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v


BUILTINS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any]], Any]] = {
    "matmul": matmul,
    "softmax": softmax,
    "layernorm": layernorm,
    "conv2d": conv2d,
    "attention": attention,
}


def _cp() -> Any:
    import cupy as cp

    return cp
