"""Triton matrix products: C = A @ B (+ bias, GELU), bf16 or fp16 in and out, fp32 accumulation.

Imported only where Triton is installed (the triton backend's compile processes, its measuring
child, the program ncu profiles); the specs name these functions by module and name.

Two kernels, one per schedule, both handling any M, N, K (masked tails):

- ``kf_triton_matmul``: one program per output tile, grouped ordering (GROUP_M tiles of M share
  their B columns in L2), pointer loads that the compiler pipelines over ``num_stages`` buffers.
- ``kf_triton_matmul_tma``: persistent (one program per SM walks the tiles) with host-built TMA
  tensor descriptors (Hopper's bulk tensor copies; out-of-bounds boxes are zero-filled on load and
  clipped on store). Needs 16-byte aligned row strides: K and N multiples of 8. ``SUBTILE`` stores
  the tile in two halves (less shared memory for the epilogue, so one more pipeline stage fits).

B is K x N (``B_KN``, as ``x @ W``) or N x K (as ``x @ W.T``, torch's Linear and an LM head).
``EPILOGUE`` 1 adds a bias over N and applies the exact (erf) GELU, as ``F.gelu(x @ W + b)``; 2 adds
the bias and applies GELU's tanh approximation (GPT-2's ``gelu_new``, ``F.gelu(..., approximate="tanh")``).
0 (the plain product) compiles neither branch: a constexpr.
"""

import triton
import triton.language as tl


@triton.jit
def _epilogue(acc, bias_ptr, offs_n, N, EPILOGUE: tl.constexpr):
    if EPILOGUE != 0:
        bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
        acc = acc + bias[None, :]
        if EPILOGUE == 1:
            acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
        else:
            # 0.5 x (1 + tanh(u)) = x sigmoid(2u) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3):
            # one exp, no tanh; exp overflows to inf for very negative x, which gives -0, not NaN.
            inner = 0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)
            acc = acc / (1.0 + tl.exp(-2.0 * inner))
    return acc


@triton.jit
def _tile(tile_id, num_pid_in_group, num_pid_m, GROUP_M: tl.constexpr):
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((tile_id % num_pid_in_group) % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def kf_triton_matmul(
    a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EPILOGUE: tl.constexpr,
):  # fmt: skip
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = _tile(tl.program_id(0), GROUP_M * num_pid_n, num_pid_m, GROUP_M)
    # Rows and columns past the end wrap around (read valid memory); the store masks them.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = _epilogue(acc, bias_ptr, offs_cn, N, EPILOGUE)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.jit
def kf_triton_matmul_tma(
    a_desc, b_desc, c_desc, bias_ptr, M, N, K, NUM_SMS,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EPILOGUE: tl.constexpr, B_KN: tl.constexpr, SUBTILE: tl.constexpr,
):  # fmt: skip
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
    # The epilogue's tile is counted separately, so the compiler can overlap one tile's stores
    # with the next tile's loads once it flattens the two loops.
    tile_id_c = start_pid - NUM_SMS
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile(tile_id, num_pid_in_group, num_pid_m, GROUP_M)
        offs_am = pid_m * BLOCK_M
        offs_bn = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = a_desc.load([offs_am, offs_k])
            if B_KN:
                b = b_desc.load([offs_k, offs_bn])
                acc = tl.dot(a, b, acc)
            else:
                b = b_desc.load([offs_bn, offs_k])
                acc = tl.dot(a, b.T, acc)
        tile_id_c += NUM_SMS
        pid_m, pid_n = _tile(tile_id_c, num_pid_in_group, num_pid_m, GROUP_M)
        offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = _epilogue(acc, bias_ptr, offs_cn, N, EPILOGUE)
        if SUBTILE:
            # Two stores of half the tile: half the shared memory for the epilogue, which leaves
            # room for one more pipeline stage (c_desc's box is BLOCK_M x BLOCK_N / 2).
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            left, right = tl.split(halves)
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], left.to(c_desc.dtype))
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N + BLOCK_N // 2], right.to(c_desc.dtype))
        else:
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))
