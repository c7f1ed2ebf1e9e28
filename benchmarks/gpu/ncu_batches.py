"""Where a profile batch's time goes: a fresh ncu process vs the worker's standby, by batch size,
and two GPUs of one host profiling at the same time.

For each batch size: one batch on a backend without a standby (ncu and its target start now) and
one on a backend whose standby is ready (ncu started earlier, target waiting with its context);
then both GPUs (if there are two) each run a standby batch at once, to see whether ncu processes
on one host serialize. Run on the GPU machine from the repository root:

    python3 benchmarks/gpu/ncu_batches.py --out DIR
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernelfarm.kernels.registry import get_kernel
from kernelfarm.worker.backends.base import MeasureRequest
from kernelfarm.worker.backends.cuda import CudaBackend, CudaBackendOptions
from kernelfarm.worker.measuring.timing import TimingPolicy


def requests(kernel: str, count: int) -> list[MeasureRequest]:
    spec = get_kernel(kernel)
    problem = spec.normalize_problem(spec.default_problem)
    configs = spec.space.valid_configs(problem)
    step = max(1, len(configs) // count)
    return [MeasureRequest(kernel, problem, c, profile=False, seed=3) for c in configs[::step][:count]]


def wait_ready(backend: CudaBackend, timeout: float = 120.0) -> float:
    started = time.perf_counter()
    while not backend.profiler_ready():
        if time.perf_counter() - started > timeout:
            raise TimeoutError("the standby ncu process did not get ready")
        time.sleep(0.05)
    return time.perf_counter() - started


def timed_profile(backend: CudaBackend, batch: list[MeasureRequest]) -> dict[str, Any]:
    started = time.perf_counter()
    outcomes = backend.profile(batch)
    wall = time.perf_counter() - started
    errors = [o.error for o in outcomes if o.error]
    standby = {bool(o.metrics.get("ncu_standby")) for o in outcomes if o.metrics}
    return {"wall_s": wall, "errors": errors, "standby": sorted(standby)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="matmul_fp32")
    parser.add_argument("--sizes", default="1,3,5")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    options = CudaBackendOptions(policy=TimingPolicy(max_time_s=0.3))
    warm = CudaBackend(options, device_index=0)
    warm.warm_up()  # as a worker does when it starts: child, libraries, ceilings, standby ncu
    fresh = CudaBackend(replace(options, profile_standby=False), device_index=0)
    batch = requests(args.kernel, max(sizes))
    assert all(m.verified for m in warm.measure_many(batch)), "the candidates must verify before profiling"
    report: dict[str, Any] = {"kernel": args.kernel, "device": warm.identity().gpu_name, "sizes": {}}
    wait_ready(warm)
    for size in sizes:
        rows: dict[str, list[dict[str, Any]]] = {"fresh": [], "standby": []}
        for _ in range(args.repeats):
            rows["fresh"].append(timed_profile(fresh, batch[:size]))
            run = timed_profile(warm, batch[:size])
            # The next standby starts when a batch ends: its time to ready is ncu's start-up.
            rows["standby"].append(run | {"next_standby_ready_s": wait_ready(warm)})
        report["sizes"][size] = {
            name: {"median_wall_s": statistics.median(r["wall_s"] for r in runs), "runs": runs}
            for name, runs in rows.items()
        }
        print(size, {name: round(v["median_wall_s"], 2) for name, v in report["sizes"][size].items()}, flush=True)
    fresh.close()
    report["two_gpus_at_once"] = two_gpus(warm, options, batch[:3])
    print("two GPUs at once:", report["two_gpus_at_once"], flush=True)
    warm.close()
    (args.out / "ncu_batches.json").write_text(json.dumps(report, indent=2))


def two_gpus(first: CudaBackend, options: CudaBackendOptions, batch: list[MeasureRequest]) -> dict[str, Any]:
    """The same batch on GPU 0 alone, then on GPUs 0 and 1 at the same moment (standbys ready)."""
    import pynvml

    pynvml.nvmlInit()
    if pynvml.nvmlDeviceGetCount() < 2:
        return {"skipped": "one GPU"}
    second = CudaBackend(options, device_index=1)
    second.warm_up()
    try:
        assert all(m.verified for m in second.measure_many(batch))
        wait_ready(first), wait_ready(second)
        alone = timed_profile(first, batch)["wall_s"]
        wait_ready(first)
        walls: dict[int, float] = {}
        threads = [threading.Thread(target=lambda i=i, b=b: walls.__setitem__(i, timed_profile(b, batch)["wall_s"]))
                   for i, b in enumerate((first, second))]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return {"alone_s": alone, "together_s": [walls[0], walls[1]]}
    finally:
        second.close()


if __name__ == "__main__":
    main()
