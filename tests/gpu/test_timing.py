"""The one timing function (worker/measuring/timing.py) and the ceilings on a real GPU."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def test_time_kernel_stops_on_noise_and_keeps_every_rep() -> None:
    import cupy as cp

    from kernelfarm.worker.measuring.timing import L2Flusher, TimingPolicy, time_kernel

    x = cp.random.default_rng(0).random(1 << 24, dtype=cp.float32)
    y = cp.empty_like(x)
    flush = L2Flusher(int(cp.cuda.Device().attributes["L2CacheSize"]))
    stats = time_kernel(lambda: cp.copyto(y, x), TimingPolicy(min_reps=12, max_time_s=1.0), flush=flush)
    assert len(stats.times_ms) >= 12
    assert stats.p20_ms <= stats.median_ms <= stats.p80_ms
    assert 0.005 < stats.median_ms < 50


def test_ceilings_are_plausible() -> None:
    from kernelfarm.worker.measuring.roofline import measure_ceilings

    c = measure_ceilings()
    assert 0.5e12 < c.dram_bytes_per_s < 10e12
    assert 5e12 < c.fp32_flops < 200e12
    assert c.tensor_flops > c.fp32_flops
