"""The whole farm on a GPU host, as a user would run it, and Kernel Tuner beside it.

For each GPU count in --gpus (e.g. "1,2"): start the embedded stack (PostgreSQL and Redis from the
wheels, API, coordinator, one cuda worker per GPU), submit each kernel over the REST API with the
same seed, budget and strategy, wait, and record trials per hour, GPU busy fraction (time the GPU
spends measuring / (GPUs x job wall time)), with and without ncu profiling time, and the best
config. Then Kernel Tuner 1.5.0 tunes the same kernel, search space and problem on one GPU with the
same evaluation budget (if it is importable), through the same .cu source and compile defines.

Caches (``--caches``, see benchmarks/gpu/caches.py): ``cold`` (the default) empties the farm's cubin
cache, the CUDA compute cache, CuPy's and Triton's caches before each GPU count's stack starts (and
before Kernel Tuner runs), all of them kept under ``--cache-root``; ``warm`` keeps what the previous
run with the same ``--cache-root`` left, the farm's cubin cache included. Run once cold, then again
warm, for the two figures side by side.

Run on the GPU machine from the repository root (see docs/BENCHMARKS.md for the exact command):
    python3 benchmarks/farm_gpu/run_farm.py --gpus 1,2 --kernel matmul_fp32 --kernel layernorm --budget 64 --out DIR
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import statistics
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from kernelfarm.client import Client
from kernelfarm.core.settings import Settings
from kernelfarm.stack import WorkerPlan, start_stack, stop_stack
from kernelfarm.testing import caches

logger = logging.getLogger("run_farm")


def _ts(text: str | None) -> float | None:
    return datetime.fromisoformat(text).timestamp() if text else None


def _at(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def run_job(client: Client, kernel: str, gpu_model: str, budget: int, parallelism: int, seed: int,
            profile: str, strategy: str | None, dump_dir: Path | None = None) -> dict[str, Any]:  # fmt: skip
    submitted = time.time()
    job = submit_job(client, kernel, gpu_model, budget, parallelism, seed, profile, strategy)
    return job_result(client, job, submitted, dump_dir)


def submit_job(client: Client, kernel: str, gpu_model: str, budget: int, parallelism: int, seed: int,
               profile: str, strategy: str | None) -> dict[str, Any]:  # fmt: skip
    body = {"kernel": kernel, "gpu_model": gpu_model, "budget_trials": budget, "parallelism": parallelism,
            "seed": seed, "profile": profile} | ({"strategy": strategy} if strategy else {})  # fmt: skip
    return client.submit(body)


def job_result(client: Client, job: dict[str, Any], submitted: float, dump_dir: Path | None = None) -> dict[str, Any]:
    """Wait for ``job`` to end; its trials per hour, time breakdown and best."""
    kernel = job["kernel"]
    while job["state"] not in ("complete", "failed", "cancelled"):
        time.sleep(0.5)
        job = client.job(job["id"])
    trials = client.all_trials(job["id"])
    if dump_dir is not None:  # every trial's timestamps and time split, for a closer look
        (dump_dir / f"trials-{job['id']}.json").write_text(json.dumps(trials, default=str))
    starts = [_at(t["started_at"]) for t in trials if t["started_at"]]
    ends = [_at(t["finished_at"]) for t in trials if t["finished_at"]]
    search_wall = max(ends) - min(starts)
    job_started, job_finished = _ts(job["started_at"]) or submitted, _ts(job["finished_at"]) or time.time()
    job_wall = job_finished - job_started
    gpu_s = sum(t["metrics"].get("gpu_s", 0.0) for t in trials)
    profile_walls = {t["profile"]["wall_seconds"] for t in trials if t.get("profile") and t["profile"]["wall_seconds"]}
    compile_s = [t["metrics"]["compile_s"] for t in trials if "compile_s" in t["metrics"]]
    timed = [t for t in trials if t["started_at"] and t["finished_at"]]
    return {
        "job_id": job["id"],
        "kernel": kernel,
        "state": job["state"],
        "status": job["status_message"],
        "trials": len(trials),
        "complete": job["progress"]["complete"],
        "failed": job["progress"]["failed"],
        "failure_kinds": _count(t["failure_kind"] for t in trials if t["failure_kind"]),
        "best": job["best"],
        "search_wall_s": search_wall,
        "job_wall_s": job_wall,
        "trials_per_hour": len(trials) / search_wall * 3600,
        "gpu_measure_s": gpu_s,
        "ncu_batches_s": sum(profile_walls),
        "ncu_batches": len(profile_walls),
        "ncu_batch_walls_s": sorted(profile_walls),
        "compile_s_median": statistics.median(compile_s) if compile_s else None,
        "compile_s_max": max(compile_s) if compile_s else None,
        "compile_cached": sum(1 for t in trials if t["metrics"].get("compile_cached")),
        # Where a worker's wall time goes: holding a trial (claim to record; a trial measured while
        # another waits for NVRTC nests inside it and is counted once), waiting for NVRTC, the
        # measuring child's round trip (sums over trials), and the gaps between a worker's trials.
        "trial_wall_s": _held(timed),
        "compile_wait_s": sum(t["metrics"].get("compile_wait_s", 0.0) for t in trials),
        "measure_wall_s": sum(t["metrics"].get("measure_wall_s", 0.0) for t in trials),
        # The measuring child's own time per request: gpu_s plus module load and set-up (pipelined
        # requests make measure_wall_s include the worker's own delays, so this is the clean one).
        "child_s": sum(t["metrics"].get("child_s", 0.0) for t in trials),
        # Of which: fresh inputs and the reference result for each trial's seed (GPU work, not in gpu_s).
        "data_s": sum(t["metrics"].get("data_s", 0.0) for t in trials),
        "between_trials_s": _gaps(timed),
        "gpu_timeline": gpu_timeline(trials, job_started, job_finished),
        "job_started": job_started,
        "job_finished": job_finished,
        "first_start": min(starts),
        "last_end": max(ends),
    }


def _spans_by_worker(trials: list[dict[str, Any]]) -> list[list[tuple[float, float]]]:
    by_worker: dict[str, list[tuple[float, float]]] = {}
    for t in trials:
        by_worker.setdefault(t["worker_name"] or "?", []).append((_at(t["started_at"]), _at(t["finished_at"])))
    return [sorted(spans) for spans in by_worker.values()]


def _held(trials: list[dict[str, Any]]) -> float:
    """Sum over workers of the time they held at least one trial (overlapping spans merged)."""
    total = 0.0
    for spans in _spans_by_worker(trials):
        end = -float("inf")
        for start, finish in spans:
            total += max(0.0, finish - max(start, end))
            end = max(end, finish)
    return total


def _gaps(trials: list[dict[str, Any]]) -> float:
    """Sum over workers of the time between one trial's result and the worker's next claim."""
    total = 0.0
    for spans in _spans_by_worker(trials):
        end = spans[0][0]
        for start, finish in spans:
            total += max(0.0, start - end)
            end = max(end, finish)
    return total


def gpu_timeline(trials: list[dict[str, Any]], job_started: float, job_finished: float) -> dict[str, dict[str, float]]:
    """Per worker (one per GPU), where the job's wall time went on its GPU, from the measuring
    child's own start time and duration of each request (``child_started_at``, ``child_s``) and the
    worker's ncu batches. ``before_first_s`` (the job's first compiles), ``measuring_s``,
    ``between_s`` and ``after_last_s`` add up to the job's wall time; ``ncu_s`` (the worker's ncu
    batches) lies inside ``after_last_s`` for a batch at the end, or ``between_s`` for one that ran
    mid-job. The rest of ``after_last_s`` waits for the other GPUs' last trials and the coordinator."""
    out: dict[str, dict[str, float]] = {}
    workers = {t["worker_name"] for t in trials if t["worker_name"]}
    for worker in sorted(workers):
        spans = sorted(
            (t["metrics"]["child_started_at"], t["metrics"]["child_started_at"] + t["metrics"]["child_s"])
            for t in trials
            if t["worker_name"] == worker and "child_started_at" in t["metrics"]
        )
        if not spans:
            continue
        walls = {
            (t["profile"]["profiled_at"], t["profile"]["wall_seconds"])
            for t in trials
            if t.get("profile") and t["profile"]["worker_name"] == worker and t["profile"]["wall_seconds"]
        }
        measuring = sum(end - start for start, end in spans)
        between = sum(max(0.0, b[0] - a[1]) for a, b in itertools.pairwise(spans))
        ncu = sum(wall for _, wall in walls)
        after = max(0.0, job_finished - spans[-1][1])
        out[worker] = {
            "measuring_s": measuring,
            "before_first_s": spans[0][0] - job_started,
            "between_s": between,
            "ncu_s": ncu,
            "after_last_s": after,
            "measurements": len(spans),
        }
    return out


def cubin_cache() -> Path:
    """The farm's cubin cache folder, as the workers will use it."""
    from kernelfarm.worker.backends.cuda import default_cache_dir  # needs the GPU packages: the GPU host only

    return Path(Settings().cuda_cache or default_cache_dir())


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


def farm_runs(gpu_counts: list[int], kernels: list[str], budget: int, seed: int, profile: str,
              state_dir: Path, report: dict[str, Any], out: Path, backend: str = "cuda",
              landscapes: tuple[Path, ...] = (), strategy: str | None = None,
              per_gpu: int = 2, concurrent: int = 1, cache_mode: str = "cold",
              cache_root: Path | None = None) -> list[dict[str, Any]]:  # fmt: skip
    results: list[dict[str, Any]] = report["farm"]
    for count in gpu_counts:
        # Cold: every GPU count starts with every cache empty, so the runs compare like with like.
        if cache_mode == "cold" and cache_root is not None:
            caches.clear(cache_root, cubin_cache())
        started = time.time()
        plan = WorkerPlan(backend, count, landscapes)
        state = start_stack(Settings(), state_dir, plan, timeout=300)
        logger.info("stack with %d GPU worker(s) up in %.1f s", count, time.time() - started)
        try:
            client = Client(state.api_url, state.token, timeout=60)
            workers = client.workers()
            model = workers[0]["gpu_model"]
            if concurrent > 1:
                results.append(concurrent_jobs(client, kernels[0], model, budget, count, per_gpu, seed, profile,
                                               strategy, concurrent))  # fmt: skip
                out.write_text(json.dumps(report, indent=2, default=str))
                continue
            for kernel in kernels:
                with UtilizationSampler(count) as utilization:
                    # The same job at every GPU count: its parallelism shapes the search (a batch
                    # of 16 pending points explores more, and so measures slower configs, than 8).
                    parallelism = per_gpu * max(gpu_counts)
                    result = run_job(client, kernel, model, budget, parallelism=parallelism, seed=seed,
                                     profile=profile, strategy=strategy, dump_dir=out.parent)  # fmt: skip
                nvml = utilization.mean(result["job_started"], result["job_finished"])
                result |= {"gpus": count, "gpu_model": model, "workers": [w["name"] for w in workers],
                           "parallelism": parallelism, "nvml_utilization": nvml, "caches": cache_mode}  # fmt: skip
                if cache_root is not None:
                    result["cache_files_after"] = caches.sizes(cache_root, cubin_cache())
                result["busy_measuring"] = result["gpu_measure_s"] / (count * result["job_wall_s"])
                result["busy_with_ncu"] = (result["gpu_measure_s"] + result["ncu_batches_s"]) / (
                    count * result["job_wall_s"]
                )
                logger.info("%s", json.dumps(result, default=str))
                results.append(result)
                out.write_text(json.dumps(report, indent=2, default=str))  # partial results survive a timeout
        finally:
            stop_stack(state_dir)
    return results


class UtilizationSampler:
    """NVML's utilization of GPUs 0..count-1 (the percentage of each sample period in which a kernel
    ran), polled every 50 ms while the job runs: a second opinion on the busy fraction that needs
    nothing from the farm. None where NVML is not available (replay smoke tests)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.samples: list[tuple[float, list[int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> UtilizationSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(self.count)]
        except Exception:
            return
        while not self._stop.wait(0.05):
            self.samples.append((time.time(), [pynvml.nvmlDeviceGetUtilizationRates(h).gpu for h in handles]))

    def mean(self, start: float, end: float) -> list[float] | None:
        """Per GPU, the mean utilization (0-1) of the samples taken between ``start`` and ``end``."""
        window = [values for at, values in self.samples if start <= at <= end]
        if not window:
            return None
        return [sum(v[i] for v in window) / len(window) / 100 for i in range(self.count)]


def concurrent_jobs(client: Client, kernel: str, gpu_model: str, budget: int, gpus: int, per_gpu: int, seed: int,
                    profile: str, strategy: str | None, jobs: int) -> dict[str, Any]:  # fmt: skip
    """``jobs`` jobs of ``kernel`` (seeds seed, seed+1, ...) submitted at once, sharing the GPUs: the
    fleet's trials per hour and busy fraction over the span from the first trial to the last."""
    submitted = time.time()
    parallelism = max(2, per_gpu * gpus // jobs)
    started = [submit_job(client, kernel, gpu_model, budget, parallelism, seed + i, profile, strategy)
               for i in range(jobs)]  # fmt: skip
    each = [job_result(client, job, submitted) for job in started]
    span = max(r["last_end"] for r in each) - min(r["first_start"] for r in each)
    wall = max(_ts(client.job(r["job_id"])["finished_at"]) or time.time() for r in each) - submitted
    gpu_s = sum(r["gpu_measure_s"] for r in each)
    ncu_s = sum(r["ncu_batches_s"] for r in each)
    trials = sum(r["trials"] for r in each)
    return {"kernel": kernel, "gpus": gpus, "concurrent_jobs": jobs, "parallelism_each": parallelism,
            "trials": trials, "search_wall_s": span, "job_wall_s": wall, "trials_per_hour": trials / span * 3600,
            "gpu_measure_s": gpu_s, "ncu_batches_s": ncu_s, "busy_measuring": gpu_s / (gpus * wall),
            "busy_with_ncu": (gpu_s + ncu_s) / (gpus * wall), "best_ms": [r["best"]["time_ms"] for r in each],
            "jobs": each}  # fmt: skip


def kernel_tuner_run(kernel: str, budget: int, strategy: str, seed: int) -> dict[str, Any]:
    """Kernel Tuner on the same .cu, space (as restrictions), problem and budget, one GPU."""
    import cupy as cp
    import numpy as np

    from kernelfarm.kernels.cuda_kernel import CudaKernel
    from kernelfarm.kernels.registry import get_kernel

    spec = get_kernel(kernel)
    cuda = spec.impl("cuda", CudaKernel)
    problem = spec.normalize_problem(spec.default_problem)
    valid = spec.space.valid_configs(problem)
    # KT computes grid and block from tunable parameters; ours are derived from the config, so a
    # per-config lookup is exposed to it as two extra parameters fixed by a restriction.
    launches = {spec.space.key(c): cuda.launch(c, problem) for c in valid}
    tune_params: dict[str, list[Any]] = {p.name: list(p.values) for p in spec.space.parameters}
    tune_params["kt_threads"] = sorted({launch.block[0] for launch in launches.values()})
    tune_params["kt_blocks"] = sorted({launch.grid[0] for launch in launches.values()})

    def restriction(params: dict[str, Any]) -> bool:
        config = {p.name: params[p.name] for p in spec.space.parameters}
        launch = launches.get(spec.space.key(config))
        return launch is not None and launch.block[0] == params["kt_threads"] and launch.grid[0] == params["kt_blocks"]

    buffers = cuda.make_inputs(problem, seed)
    args = [np.asarray(cp.asnumpy(a)) if hasattr(a, "shape") else a for a in cuda.arguments(buffers, problem)]
    reference = cuda.reference(buffers, problem)
    outputs = set(cuda.outputs())
    answer = [cp.asnumpy(reference[name]) if name in outputs else None for name in _arg_names(cuda, buffers, problem)]
    source = cuda.source.text
    defines = {k: v for k, v in cuda.defines(valid[0], problem).items() if k not in tune_params}
    prefix = "".join(f"#define {k} {v}\n" for k, v in defines.items())
    started = time.time()
    shared = {key: launch.shared_bytes for key, launch in launches.items()}
    results, env = _tune(spec, prefix + source, args, tune_params, restriction, answer, strategy, budget, shared)
    wall = time.time() - started
    ok = [r for r in results if isinstance(r.get("time"), float)]
    best = min(ok, key=lambda r: r["time"]) if ok else None
    return {"tool": "kernel_tuner", "strategy": strategy, "kernel": kernel, "evaluations": len(results),
            "valid": len(ok), "wall_s": wall, "configs_per_hour": len(results) / wall * 3600,
            "best_ms": best["time"] if best else None,
            "best_config": {k: best[k] for k in tune_params} if best else None,
            "device": env.get("device_name")}  # fmt: skip


def _arg_names(cuda: Any, buffers: dict[str, Any], problem: dict[str, Any]) -> list[str]:
    by_id = {id(v): k for k, v in buffers.items()}
    return [by_id.get(id(a), "") for a in cuda.arguments(buffers, problem)]


def _tune(spec, source, args, tune_params, restriction, answer, strategy, budget, shared):
    def shared_bytes(params):
        return shared[spec.space.key({p.name: params[p.name] for p in spec.space.parameters})]

    from kernel_tuner import tune_kernel

    from kernelfarm.kernels.cuda_kernel import CudaKernel
    from kernelfarm.kernels.cuda_source import INCLUDE_DIR

    # One block per kt_blocks: problem_size = kt_blocks with grid_div_x = 1 gives grid.x = kt_blocks.
    return tune_kernel(
        spec.impl("cuda", CudaKernel).entry, source, problem_size=lambda p: (p["kt_blocks"], 1, 1), arguments=args,
        tune_params=tune_params, restrictions=restriction, grid_div_x=[], block_size_names=["kt_threads"],
        lang="cupy", strategy=strategy, strategy_options={"max_fevals": budget}, answer=answer,
        # KT's default tolerance is absolute; fp32 products of 4096-long dot products need ~1e-2
        atol=1e-2, verbose=False, iterations=32,
        # dynamic shared memory per config, as our launcher passes it (a byte-sized char array)
        smem_args={"size": shared_bytes, "type": "char"},
        compiler_options=[f"-I{INCLUDE_DIR}"],  # the shared headers (#include "kf/...")
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", default="1,2")
    parser.add_argument("--kernel", action="append", default=[])
    parser.add_argument("--budget", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", default="all")
    parser.add_argument("--strategy", default=None, help="farm strategy (default: the farm's default)")
    parser.add_argument("--parallelism-per-gpu", type=int, default=2,
                        help="trials in flight per GPU of the largest --gpus count; every count runs "
                             "the same job (a compile-heavy kernel needs more)")  # fmt: skip
    parser.add_argument("--concurrent-jobs", type=int, default=1,
                        help="submit this many jobs of the first --kernel at once and report the fleet")  # fmt: skip
    parser.add_argument("--kt-strategy", action="append", default=[])
    parser.add_argument("--kt-budget", type=int, default=None, help="Kernel Tuner's evaluations (default: --budget)")
    parser.add_argument("--caches", choices=("cold", "warm"), default="cold",
                        help="cold: empty every cache first (and before each GPU count); warm: keep what the "
                             "previous run with this --cache-root left")  # fmt: skip
    parser.add_argument("--cache-root", type=Path, default=Path("/tmp/kf-caches"),
                        help="where the CUDA compute cache, CuPy's and Triton's caches live for this run")  # fmt: skip
    parser.add_argument("--state-dir", type=Path, default=Path("/tmp/kf-farm"))
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--replay", type=Path, action="append", default=[],
                        help="smoke-test without a GPU: replay workers serving these landscapes")  # fmt: skip
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    kernels = args.kernel or ["matmul_fp32"]
    report: dict[str, Any] = {"farm": [], "kernel_tuner": []}
    out = args.out / "farm_gpu.json"
    cache_root = None if args.replay else args.cache_root
    if cache_root is not None:  # before anything here or in the stack initializes CUDA
        report["caches"] = caches.use(args.caches, cache_root, cubin_cache())
    farm_runs([int(g) for g in args.gpus.split(",") if g], kernels, args.budget, args.seed, args.profile,
              args.state_dir, report, out, "replay" if args.replay else "cuda", tuple(args.replay),
              args.strategy, args.parallelism_per_gpu, args.concurrent_jobs, args.caches, cache_root)  # fmt: skip
    for strategy in args.kt_strategy:
        for kernel in kernels:
            if args.caches == "cold" and cache_root is not None:
                # The farm's runs filled them. Kernel Tuner never reads the farm's cubin cache: keep it
                # for a warm run after this one.
                caches.clear(cache_root, None)
            try:
                report["kernel_tuner"].append(
                    kernel_tuner_run(kernel, args.kt_budget or args.budget, strategy, args.seed)
                    | {"caches": args.caches}
                )
            except Exception as exc:  # report, don't lose the farm numbers
                logger.exception("kernel tuner run failed")
                report["kernel_tuner"].append({"kernel": kernel, "strategy": strategy, "error": repr(exc)})
            out.write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
