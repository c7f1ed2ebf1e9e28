"""Roofline: measured ceilings of a GPU and where a trial sits under them.

Ceilings are measured, not taken from datasheets (a datasheet rate is a lead, not a ceiling): a large
device-to-device copy (bytes read + written) for DRAM bandwidth, cuBLAS SGEMM for the FP32 FFMA
ceiling and a cuBLAS fp16 GEMM for the tensor-core ceiling (bf16 runs at the same rate on Hopper).

The ceilings are the GPU's, not a backend's: measured once in the measuring child (its ``ceilings``
op, cached by :mod:`.ceilings`), they classify any backend's timings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Ceilings:
    dram_bytes_per_s: float
    fp32_flops: float
    tensor_flops: float
    how: str = "d2d copy 1 GiB; cuBLAS SGEMM 4096^3; cuBLAS HGEMM 8192^3 (random data)"

    def peak(self, kind: str) -> float:
        return self.tensor_flops if kind == "tensor" else self.fp32_flops


def classify(flops: float, bytes_moved: float, seconds: float, ceilings: Ceilings, peak_kind: str) -> dict[str, Any]:
    """Achieved rates, their fractions of the ceilings, and compute- vs memory-bound.

    A kernel is memory-bound when its arithmetic intensity (FLOP per DRAM byte of the minimum
    traffic) is under the ridge point (peak FLOP/s / bandwidth). ``roofline_fraction`` is the
    achieved rate over the roof at that intensity: 1.0 means no version can run much faster.
    """
    peak = ceilings.peak(peak_kind)
    achieved_flops = flops / seconds if seconds > 0 else 0.0
    achieved_bytes = bytes_moved / seconds if seconds > 0 else 0.0
    intensity = flops / bytes_moved if bytes_moved > 0 else float("inf")
    ridge = peak / ceilings.dram_bytes_per_s
    bound = "memory" if intensity < ridge else "compute"
    roof_seconds = max(flops / peak if peak > 0 else 0.0, bytes_moved / ceilings.dram_bytes_per_s)
    return {
        "achieved_flops_per_s": achieved_flops,
        "achieved_bytes_per_s": achieved_bytes,
        "arithmetic_intensity": intensity,
        "ridge_intensity": ridge,
        "bound": bound,
        "flops_fraction_of_peak": achieved_flops / peak if peak > 0 else 0.0,
        "bandwidth_fraction_of_peak": achieved_bytes / ceilings.dram_bytes_per_s,
        "roofline_fraction": roof_seconds / seconds if seconds > 0 else 0.0,
        "peak_kind": peak_kind,
        "peak_flops_per_s": peak,
        "peak_bytes_per_s": ceilings.dram_bytes_per_s,
    }


def measure_ceilings() -> Ceilings:
    """Measure the three ceilings on the current device (about a second of GPU time)."""
    import cupy as cp

    from kernelfarm.worker.measuring.timing import TimingPolicy, time_kernel

    policy = TimingPolicy(warmup_s=0.1, min_reps=10, max_reps=50, max_time_s=1.0, flush_l2=False)
    n_bytes = 1 << 30
    copy = _time_copy(n_bytes, policy)
    rng = cp.random.default_rng(2)
    n = 4096
    a, b = rng.random((n, n), dtype=cp.float32) - 0.5, rng.random((n, n), dtype=cp.float32) - 0.5
    c = cp.empty_like(a)
    sgemm = time_kernel(lambda: cp.matmul(a, b, out=c), policy)
    m = 8192
    x = (rng.random((m, m), dtype=cp.float32) - 0.5).astype(cp.float16)
    y = (rng.random((m, m), dtype=cp.float32) - 0.5).astype(cp.float16)
    z = cp.empty_like(x)
    hgemm = time_kernel(lambda: cp.matmul(x, y, out=z), policy)
    return Ceilings(
        dram_bytes_per_s=2 * n_bytes / (copy.median_ms * 1e-3),
        fp32_flops=2 * n**3 / (sgemm.median_ms * 1e-3),
        tensor_flops=2 * m**3 / (hgemm.median_ms * 1e-3),
    )


def _time_copy(n_bytes: int, policy: Any) -> Any:
    import cupy as cp

    from kernelfarm.worker.measuring.timing import time_kernel

    src = cp.random.default_rng(1).random(n_bytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    return time_kernel(lambda: cp.copyto(dst, src), policy)
