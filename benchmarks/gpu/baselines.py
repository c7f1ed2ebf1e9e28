"""Library baselines, timed with the farm's own timing function in the same process."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kernelfarm.core.measurement import TimingStats
from kernelfarm.worker.measuring.timing import L2Flusher, TimingPolicy, time_kernel


def torch_baseline(kernel: str, problem: Mapping[str, Any]) -> tuple[str, Callable[[], Any]] | None:
    """(label, launch) of the library call that does what ``kernel`` does, on fresh random data."""
    import torch

    dev = "cuda"
    if kernel in ("layernorm", "softmax"):
        dtype = torch.float32 if problem["dtype"] == "float32" else torch.bfloat16
        m, n = int(problem["M"]), int(problem["N"])
        x = (torch.rand(m, n, device=dev) * 4 - 1.5).to(dtype)
        if kernel == "softmax":
            return "torch.softmax (eager)", lambda: torch.softmax(x, dim=-1)
        w = (torch.rand(n, device=dev) + 0.5).to(dtype)
        b = (torch.rand(n, device=dev) - 0.5).to(dtype)
        return "torch.nn.functional.layer_norm (eager)", lambda: torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5)
    if kernel == "matmul_fp32":
        torch.backends.cuda.matmul.allow_tf32 = False  # true fp32 SGEMM, as our kernel does
        m, n, k = int(problem["M"]), int(problem["N"]), int(problem["K"])
        a = torch.rand(m, k, device=dev) * 2 - 1
        bb = torch.rand(k, n, device=dev) * 2 - 1
        return "cuBLAS SGEMM (torch.matmul, TF32 off)", lambda: torch.matmul(a, bb)
    if kernel in ("matmul_bf16", "matmul_bf16_wgmma"):
        m, n, k = int(problem["M"]), int(problem["N"]), int(problem["K"])
        a16 = (torch.rand(m, k, device=dev) * 2 - 1).to(torch.bfloat16)
        w16 = (torch.rand(n, k, device=dev) * 2 - 1).to(torch.bfloat16)
        return "cuBLAS bf16 (torch.matmul(A, B.T))", lambda: torch.matmul(a16, w16.T)
    if kernel == "flash_attention":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        shape = (int(problem["B"]), int(problem["H"]), int(problem["S"]), int(problem["D"]))
        q, k, v = (torch.randn(shape, device=dev, dtype=torch.bfloat16) for _ in range(3))
        causal = bool(problem["causal"])

        def sdpa() -> Any:
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

        return "torch SDPA, flash backend", sdpa
    if kernel == "conv2d":
        torch.backends.cudnn.benchmark = True  # let cuDNN pick its fastest algorithm
        n, h, w, c, ko, r = (int(problem[x]) for x in ("N", "H", "W", "C", "K", "R"))
        x = torch.rand(n, c, h, w, device=dev).to(torch.bfloat16).to(memory_format=torch.channels_last)
        wt = (torch.rand(ko, c, r, r, device=dev) - 0.5).to(torch.bfloat16).to(memory_format=torch.channels_last)
        return "cuDNN (torch conv2d, NHWC, benchmark=True)", lambda: torch.nn.functional.conv2d(x, wt, padding=r // 2)
    return None


def time_library(launch: Callable[[], Any], policy: TimingPolicy) -> TimingStats:
    import cupy as cp

    flush = L2Flusher(int(cp.cuda.Device().attributes["L2CacheSize"]))
    return time_kernel(launch, policy, flush=flush)


def time_copy(n_bytes: int, policy: TimingPolicy) -> TimingStats:
    """A device-to-device copy of ``n_bytes`` (read n, write n), timed like every kernel."""
    import cupy as cp

    src = cp.random.default_rng(5).random(n_bytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    return time_library(lambda: cp.copyto(dst, src), policy)
