"""A job's first compiles on a fresh compile pool: without and with the warm-up compile.

The pool's processes start when the worker starts. A process's first NVRTC compile also loads
NVRTC's builtins and ptxas for the architecture; ``CompilePool(warm_arch=...)`` pays that at start
with a tiny kernel. This measures, for each variant, a pool started and left idle for a while (as a
worker waits for its first job), then the first ``--count`` matmul_fp32 configs submitted at once
(a job's first batch), each to an empty cache: their NVRTC seconds and the wall time until all
are compiled. The same configs are then compiled again on the same pool (with an unused define, so
not a cache hit). On a pool with more processes than configs that second batch mostly lands on
processes that have not compiled yet, so without the warm-up it is not a steady-state time either.
Needs NVRTC (CuPy), not a GPU context.

    python3 benchmarks/gpu/compile_warm.py --out DIR
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelfarm.kernels.registry import get_kernel
from kernelfarm.worker.cuda.compiler import CompileJob, CompilePool


def jobs(count: int, arch: str, extra: tuple[str, ...] = ()) -> list[CompileJob]:
    spec = get_kernel("matmul_fp32")
    problem = spec.normalize_problem(spec.default_problem)
    configs = spec.space.valid_configs(problem)
    step = max(1, len(configs) // count)
    return [CompileJob.for_config(spec, c, problem, arch, extra) for c in configs[::step][:count]]


def first_batch(pool: CompilePool, batch: list[CompileJob]) -> dict[str, Any]:
    started = time.perf_counter()
    results = [future.result() for future in [pool.submit(job) for job in batch]]
    assert all(r.ok and not r.cached for r in results), [r.log[:200] for r in results if not r.ok]
    seconds = [r.seconds for r in results]
    return {"wall_s": time.perf_counter() - started, "median_s": statistics.median(seconds), "max_s": max(seconds)}


def run(warm: bool, count: int, arch: str, idle_s: float, workers: int | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as cache:
        pool = CompilePool(Path(cache), workers, warm_arch=arch if warm else None)
        time.sleep(idle_s)  # the worker registers and waits for a job
        try:
            cold = first_batch(pool, jobs(count, arch))
            steady = first_batch(pool, jobs(count, arch, ("-DKF_AGAIN=1",)))
        finally:
            pool.close()
    return {"warm": warm, "configs": count, "first": cold, "again": steady}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--idle", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rows = [
        run(warm, args.count, args.arch, args.idle, args.workers) for _ in range(args.repeats) for warm in (False, True)
    ]
    for row in rows:
        print(json.dumps(row))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compile_warm.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
