"""The device's roofline ceilings for the profiler's classes.

On a GPU these are the farm's own measurement (:func:`kernelfarm.worker.measuring.roofline.measure_ceilings`,
the same the workers take); on the CPU the same three probes run through torch, so the CPU mode's
classes stand on measured numbers too. A JSON file of :class:`Ceilings` fields can stand in for both.
"""

from __future__ import annotations

import json
import time
from dataclasses import fields
from pathlib import Path

from kernelfarm.worker.measuring.roofline import Ceilings


def load(path: Path) -> Ceilings:
    data = json.loads(path.read_text())
    names = {f.name for f in fields(Ceilings)}
    return Ceilings(**{k: v for k, v in data.items() if k in names})


def measure(device: str) -> Ceilings:
    if device.startswith("cuda"):
        from kernelfarm.worker.measuring.roofline import measure_ceilings

        return measure_ceilings()
    return _measure_cpu()


def _best_seconds(fn: object, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - start)
    return best


def _measure_cpu() -> Ceilings:
    import torch

    src = torch.rand(1 << 25)  # 128 MiB: far larger than any CPU cache
    dst = torch.empty_like(src)
    copy_s = _best_seconds(lambda: dst.copy_(src))
    n = 1024
    a, b = torch.rand(n, n), torch.rand(n, n)
    sgemm_s = _best_seconds(lambda: a @ b)
    return Ceilings(
        dram_bytes_per_s=2 * src.numel() * 4 / copy_s, fp32_flops=2 * n**3 / sgemm_s, tensor_flops=2 * n**3 / sgemm_s,
        how="CPU: torch copy of 128 MiB; torch fp32 GEMM 1024^3 (no tensor cores: the same rate twice)",
    )  # fmt: skip
