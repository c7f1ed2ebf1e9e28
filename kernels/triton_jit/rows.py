"""Triton row kernels over an M x N tensor (fp32, bf16 or fp16 storage, fp32 arithmetic).

Imported only where Triton is installed. Each program handles ``ROWS`` consecutive rows, one at a
time, the whole row in registers (``BLOCK_N``: N rounded up to a power of two, the tail masked);
``num_stages`` lets the compiler prefetch the next row while it reduces this one.
"""

import triton
import triton.language as tl


@triton.jit
def kf_triton_softmax(x_ptr, y_ptr, M, N, BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    for r in tl.range(0, ROWS):
        row = tl.program_id(0) * ROWS + r
        if row < M:
            offset = row.to(tl.int64) * N
            x = tl.load(x_ptr + offset + cols, mask=mask, other=-float("inf")).to(tl.float32)
            e = tl.exp(x - tl.max(x, axis=0))
            y = e / tl.sum(e, axis=0)
            tl.store(y_ptr + offset + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def kf_triton_layernorm(
    x_ptr, gamma_ptr, beta_ptr, y_ptr, M, N, eps, BLOCK_N: tl.constexpr, ROWS: tl.constexpr
):  # fmt: skip
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    gamma = tl.load(gamma_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    beta = tl.load(beta_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    for r in tl.range(0, ROWS):
        row = tl.program_id(0) * ROWS + r
        if row < M:
            offset = row.to(tl.int64) * N
            x = tl.load(x_ptr + offset + cols, mask=mask, other=0.0).to(tl.float32)
            mean = tl.sum(x, axis=0) / N
            centered = tl.where(mask, x - mean, 0.0)
            variance = tl.sum(centered * centered, axis=0) / N
            y = centered * tl.rsqrt(variance + eps) * gamma + beta
            tl.store(y_ptr + offset + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
