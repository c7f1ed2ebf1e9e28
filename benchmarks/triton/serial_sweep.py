"""The baseline the farm's Triton matmul is compared with: a plain serial sweep, as a Triton user
would write it with the autotuner's habits (compile on first call, then ``do_bench``), one config after
the other in one process, over 96 configs (BLOCK_M, BLOCK_N in 64-256 except 256 x 256, BLOCK_K 32/64,
4/8 warps, 3-5 stages) of the farm's own tiled kernel (``kf_triton_matmul``), with cuBLAS
(``torch.matmul``) timed in the same run with the same ``do_bench``.

Cold: TRITON_CACHE_DIR points at a fresh, empty directory. Prints the best, the sweep's wall time, and
when the best-so-far first reached each fraction of cuBLAS.

    python3 benchmarks/triton/serial_sweep.py --size 4096 --out sweep.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, action="append", default=[])
    parser.add_argument("--out", type=Path, default=Path("sweep.json"))
    args = parser.parse_args()
    cache = Path(tempfile.gettempdir()) / "kf-triton-sweep-cache"
    shutil.rmtree(cache, ignore_errors=True)
    os.environ["TRITON_CACHE_DIR"] = str(cache)

    import torch

    configs = [
        c for c in itertools.product((64, 128, 256), (64, 128, 256), (32, 64), (4, 8), (3, 4, 5)) if c[:2] != (256, 256)
    ]
    report: dict[str, Any] = {"gpu": torch.cuda.get_device_name(), "configs": len(configs), "sizes": {}}
    for size in args.size or [4096]:
        report["sizes"][size] = sweep(size, configs)
        args.out.write_text(json.dumps(report, indent=2))
    args.out.write_text(json.dumps(report, indent=2))


def sweep(size: int, configs: list[tuple[int, ...]]) -> dict[str, Any]:
    """Compile and time each config in turn, as the autotuner does; cuBLAS first, same ``do_bench``."""
    import torch
    import triton
    from triton.testing import do_bench

    from kernelfarm.kernels.triton_jit.matmul import kf_triton_matmul

    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)
    cublas = do_bench(lambda: torch.matmul(a, b), return_mode="median")
    rows: list[dict[str, Any]] = []
    best, start = float("inf"), time.perf_counter()
    for bm, bn, bk, warps, stages in configs:
        grid = (triton.cdiv(size, bm) * triton.cdiv(size, bn),)

        def launch(grid: tuple[int] = grid, bm: int = bm, bn: int = bn, bk: int = bk, warps: int = warps,
                   stages: int = stages) -> None:  # fmt: skip
            kf_triton_matmul[grid](a, b, c, c, size, size, size, a.stride(0), a.stride(1), b.stride(0),
                                   b.stride(1), c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                   GROUP_M=8, EPILOGUE=0, num_warps=warps, num_stages=stages)  # fmt: skip

        try:
            ms = do_bench(launch, return_mode="median")
        except Exception as exc:  # out of resources: the sweep goes on, as the autotuner's does
            rows.append({"config": [bm, bn, bk, warps, stages], "error": type(exc).__name__})
            continue
        best = min(best, ms)
        rows.append({"config": [bm, bn, bk, warps, stages], "ms": ms, "at_s": time.perf_counter() - start,
                     "best_ms": best})  # fmt: skip
    wall = time.perf_counter() - start
    reached = {
        f"{pct}%": next((r["at_s"] for r in rows if "best_ms" in r and cublas / r["best_ms"] >= pct / 100), None)
        for pct in (90, 95, 95.6, 100, 105, 111)
    }
    print(f"{size}: cuBLAS {cublas:.4f} ms, best {best:.4f} ms = {cublas / best:.3f} of cuBLAS, sweep {wall:.1f} s, "
          f"{sum(1 for r in rows if 'error' in r)} failed; reached (s) {reached}")  # fmt: skip
    return {"cublas_ms": cublas, "best_ms": best, "fraction_of_cublas": cublas / best, "wall_s": wall,
            "failed": sum(1 for r in rows if "error" in r), "reached_at_s": reached, "rows": rows}  # fmt: skip


if __name__ == "__main__":
    main()
