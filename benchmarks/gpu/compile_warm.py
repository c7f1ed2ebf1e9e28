"""A job's first compiles on a fresh compile pool, cold and warm, each cache named.

Three caches can make a compile fast: the farm's cubin cache (a hit skips NVRTC), the CUDA compute
cache (``~/.nv/ComputeCache``, or ``CUDA_CACHE_PATH``), which NVRTC 13 also answers from across
processes, and a process's own warm state (its first compile loads NVRTC's builtins and ptxas; the
pool's warm-up kernel pays that at start). The earlier version of this benchmark reported 0.019-0.027 s
"warmed" compiles that were compute-cache hits of the same sources compiled minutes before. Each
scenario here starts from caches it names:

- ``cold``: the farm's default pool (compute cache off in its processes), empty cubin cache, pool
  warm-up on: every compile is a real NVRTC + ptxas run. This is what a job's first compiles cost.
- ``cold_no_warmup``: the same, without the pool's warm-up kernel.
- ``compute_cache_cold``: the compute cache allowed, in an empty ``CUDA_CACHE_PATH``.
- ``compute_cache_warm``: the compute cache allowed, in the ``CUDA_CACHE_PATH`` the previous scenario
  filled with these very sources (what a re-run on the same host met before this change).
- ``cubin_cache_hit``: a new pool on the cubin cache ``cold`` filled: no NVRTC at all.

For each: the first ``--count`` matmul_fp32 configs submitted at once (a job's first batch) after the
pool sat idle ``--idle`` s, their NVRTC seconds (median, max), the wall time until all are compiled,
and how many carried ptxas' register/spill report. Needs NVRTC (CuPy), not a GPU context.

    python3 benchmarks/gpu/compile_warm.py --idle 3 --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelfarm.kernels.registry import get_kernel
from kernelfarm.worker.cuda.compiler import CompileJob, CompilePool

SCENARIOS = ("cold_no_warmup", "cold", "compute_cache_cold", "compute_cache_warm", "cubin_cache_hit")


def jobs(count: int, arch: str, salt: str) -> list[CompileJob]:
    """``count`` configs spread over the space; ``salt`` (an unused define) makes each repeat's sources
    new to every cache."""
    spec = get_kernel("matmul_fp32")
    problem = spec.normalize_problem(spec.default_problem)
    configs = spec.space.valid_configs(problem)
    step = max(1, len(configs) // count)
    return [CompileJob.for_config(spec, c, problem, arch, (f"-DKF_SALT={salt}",)) for c in configs[::step][:count]]


def batch(pool: CompilePool, work: list[CompileJob]) -> dict[str, Any]:
    started = time.perf_counter()
    results = [future.result() for future in [pool.submit(job) for job in work]]
    assert all(r.ok for r in results), [r.log[:200] for r in results if not r.ok]
    seconds = [r.seconds for r in results]
    return {
        "wall_s": time.perf_counter() - started,
        "median_s": statistics.median(seconds),
        "max_s": max(seconds),
        "cubin_cache_hits": sum(r.cached for r in results),
        "ptxas_reported": sum(bool(r.resources) for r in results),
        "configs": len(results),
    }


def scenario(name: str, work: list[CompileJob], arch: str, idle_s: float, cubins: Path, compute_cache: Path,
             workers: int | None) -> dict[str, Any]:  # fmt: skip
    # The pool's processes are spawned: they start with this environment.
    os.environ.pop("CUDA_CACHE_DISABLE", None)
    os.environ["CUDA_CACHE_PATH"] = str(compute_cache)
    allow_compute_cache = name.startswith("compute_cache")
    pool = CompilePool(cubins, workers, warm_arch=None if name == "cold_no_warmup" else arch,
                       driver_cache=allow_compute_cache)  # fmt: skip
    try:
        pool.wait_started(120)
        time.sleep(idle_s)  # the worker registers and waits for a job
        result = batch(pool, work)
    finally:
        pool.close()
    files = sum(1 for p in compute_cache.rglob("*") if p.is_file())
    return {"scenario": name, **result, "compute_cache_files_after": files}


def run(repeat: int, count: int, arch: str, idle_s: float, workers: int | None) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as root:
        base = Path(root)
        for name in SCENARIOS:
            # New sources per scenario, except the two that must meet what an earlier one left.
            salt = {"compute_cache_warm": "compute_cache_cold", "cubin_cache_hit": "cold"}.get(name, name)
            cubins = base / ("cubins-cold" if name in ("cold", "cubin_cache_hit") else f"cubins-{name}")
            compute = base / ("compute-shared" if name.startswith("compute_cache") else f"compute-{name}")
            compute.mkdir(exist_ok=True)
            work = jobs(count, arch, f"{salt}_{repeat}_{os.getpid()}")
            rows.append({"repeat": repeat, **scenario(name, work, arch, idle_s, cubins, compute, workers)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--idle", type=float, default=3.0)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rows = [row for r in range(args.repeats) for row in run(r, args.count, args.arch, args.idle, args.workers)]
    for row in rows:
        print(json.dumps(row))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compile_warm.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
