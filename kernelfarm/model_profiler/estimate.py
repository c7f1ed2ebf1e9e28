"""FLOPs and minimum memory traffic of an operator, from its input shapes.

torch's FLOP counter knows matrix products and convolutions only; attention and normalisations are
estimated here. Bytes are the *minimum* traffic (each input read once, the output written once), so
an achieved GB/s above the DRAM ceiling means the data came from cache, not an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MATMUL_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear"})
ATTENTION_OPS = frozenset({
    "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention", "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_cudnn_attention_forward",
    "aten::_flash_attention_forward", "aten::_efficient_attention_forward",
})  # fmt: skip
NORM_OPS = frozenset({"aten::native_layer_norm", "aten::layer_norm", "aten::_fused_rms_norm", "aten::rms_norm"})
SOFTMAX_OPS = frozenset({"aten::_softmax", "aten::softmax", "aten::_safe_softmax"})
ELEMENTWISE_OPS = frozenset({
    "aten::add", "aten::add_", "aten::mul", "aten::mul_", "aten::div", "aten::sub", "aten::pow", "aten::tanh",
    "aten::gelu", "aten::silu", "aten::neg", "aten::rsqrt", "aten::mean", "aten::cat", "aten::copy_",
    "aten::where", "aten::masked_fill", "aten::to", "aten::_to_copy", "aten::clone", "aten::contiguous",
    "aten::embedding", "aten::index_select", "aten::sigmoid", "aten::exp", "aten::cos", "aten::sin",
})  # fmt: skip


@dataclass(frozen=True)
class GemmShape:
    m: int
    n: int
    k: int
    batch: int = 1


def gemm_shape(name: str, shapes: list[list[int]]) -> GemmShape | None:
    """M, N, K (and batch) of a matrix-product operator, or None when the shapes do not say."""
    dims = [s for s in shapes if s]
    try:
        if name == "aten::mm" and len(dims) >= 2:
            (m, k), (_, n) = dims[0], dims[1]
            return GemmShape(m, n, k)
        if name == "aten::addmm" and len(shapes) >= 3:
            (m, k), (_, n) = shapes[1], shapes[2]
            return GemmShape(m, n, k)
        if name in ("aten::bmm", "aten::baddbmm"):
            a, b = (shapes[0], shapes[1]) if name == "aten::bmm" else (shapes[1], shapes[2])
            return GemmShape(a[1], b[2], a[2], batch=a[0])
        if name in ("aten::linear", "aten::matmul") and len(dims) >= 2:
            x, w = dims[0], dims[1]
            m = math.prod(x[:-1]) if len(x) > 1 else 1
            n = w[0] if name == "aten::linear" else w[-1]
            return GemmShape(m, n, x[-1])
    except (ValueError, IndexError):
        return None
    return None


# The flash and memory-efficient kernels' own operators take (batch, seq, heads, dim); the SDPA
# operators and cuDNN's take (batch, heads, seq, dim).
SEQ_MAJOR_ATTENTION = frozenset({"aten::_flash_attention_forward", "aten::_efficient_attention_forward"})


@dataclass(frozen=True)
class AttentionShape:
    batch: int
    heads: int
    seq_q: int
    seq_k: int
    dim: int


def attention_shape(name: str, shapes: list[list[int]]) -> AttentionShape | None:
    if len(shapes) < 3 or len(shapes[0]) != 4 or len(shapes[1]) != 4:
        return None
    (b, x, y, d), k = shapes[0], shapes[1]
    if name in SEQ_MAJOR_ATTENTION:
        return AttentionShape(b, y, x, k[1], d)
    return AttentionShape(b, x, y, k[2], d)


def attention_flops(name: str, shapes: list[list[int]], causal: bool = False) -> float:
    """2·B·H·S·S·D for Q·Kᵀ and again for P·V (halved when causal)."""
    a = attention_shape(name, shapes)
    if a is None:
        return 0.0
    flops = 4.0 * a.batch * a.heads * a.seq_q * a.seq_k * a.dim
    return flops / 2 if causal else flops


def estimate(name: str, shapes: list[list[int]], torch_flops: float, element_bytes: int) -> tuple[float, float]:
    """(FLOPs, minimum bytes) of one call."""
    numel = [math.prod(s) for s in shapes if s]
    largest = max(numel, default=0)
    gemm = gemm_shape(name, shapes) if name in MATMUL_OPS else None
    if gemm is not None:
        flops = torch_flops or 2.0 * gemm.batch * gemm.m * gemm.n * gemm.k
        traffic = gemm.batch * (gemm.m * gemm.k + gemm.k * gemm.n + gemm.m * gemm.n)
        return flops, float(traffic * element_bytes)
    if name in ATTENTION_OPS:
        q = numel[0] if numel else 0
        return attention_flops(name, shapes, causal=True), float((sum(numel[:3]) + q) * element_bytes)
    if name in NORM_OPS or name in SOFTMAX_OPS:
        return 5.0 * largest, float(2 * largest * element_bytes)
    # Elementwise and everything else: read every input, write one output as large as the largest.
    return torch_flops or float(largest), float((sum(numel) + largest) * element_bytes)
