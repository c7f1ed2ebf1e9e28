"""Triton targets on the real farm: the embedded stack with one triton worker on the GPU, jobs over
the REST API, cuBLAS and torch measured side by side in the same run with the farm's own timing
function (CUDA events, L2 flushed before every repetition, median).

- matmul_triton bf16 at each --size (M = N = K): the farm's best within --budget trials as a
  fraction of cuBLAS (torch.matmul), and when the best-so-far first reached each threshold, in
  seconds since the job was submitted;
- matmul_bias_gelu_triton at GPT-2 small's MLP shape (4096 x 768 -> 3072, bf16): the farm's best
  against torch's unfused ``F.gelu(x @ W + b)`` (and ``F.gelu(torch.addmm(b, x, W))``);
- optionally (--lm-head) the LM-head shape 4096 x 768 -> 50257 (odd N, W as N x K).

Cold compile caches: every job starts with an empty Triton cache (the worker's, a fresh directory
under --cache-root, emptied before each job), TRITON_CACHE_DIR points at a fresh directory for
anything else in these processes, and the driver's compute cache (CUDA_CACHE_PATH) is fresh too.

Run on the GPU machine from the repository root (docs/benchmarks/TRITON.md has the exact command):
    python3 benchmarks/triton/farm_targets.py --out results.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import shutil
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

logger = logging.getLogger("triton_targets")


def cold_caches(root: Path) -> Path:
    """Fresh, empty compile caches for everything this run starts; returns the farm's Triton cache."""
    shutil.rmtree(root, ignore_errors=True)
    farm_cache = root / "farm"
    os.environ["KERNELFARM_TRITON_CACHE"] = str(farm_cache)
    os.environ["TRITON_CACHE_DIR"] = str(root / "triton-other")
    os.environ["CUDA_CACHE_PATH"] = str(root / "nv-compute-cache")
    return farm_cache


def torch_baselines(sizes: list[int], lm_head: bool) -> dict[str, float]:
    """Median ms of cuBLAS (torch.matmul) and of torch's unfused MLP epilogue, timed like a trial."""
    import cupy as cp
    import torch
    import torch.nn.functional as F

    from kernelfarm.worker.measuring.timing import L2Flusher, TimingPolicy, time_kernel

    flush = L2Flusher(int(cp.cuda.Device().attributes["L2CacheSize"]))
    policy = TimingPolicy(max_time_s=2.0, max_reps=500)
    torch.manual_seed(0)
    out: dict[str, float] = {}

    def median(launch: Any) -> float:
        launch()
        torch.cuda.synchronize()
        return time_kernel(launch, policy, flush=flush).median_ms

    for size in sizes:
        a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
        out[f"cublas_{size}"] = median(lambda a=a, b=b: torch.matmul(a, b))
        del a, b
    x = torch.randn(4096, 768, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(768, 3072, device="cuda", dtype=torch.bfloat16) * 0.05
    bias = torch.randn(3072, device="cuda", dtype=torch.bfloat16)
    out["torch_unfused_gelu"] = median(lambda: F.gelu(x @ w + bias))
    out["torch_addmm_gelu"] = median(lambda: F.gelu(torch.addmm(bias, x, w)))
    out["cublas_mlp_matmul_only"] = median(lambda: x @ w)
    if lm_head:
        head = torch.randn(50257, 768, device="cuda", dtype=torch.bfloat16) * 0.05
        out["cublas_lm_head"] = median(lambda: x @ head.T)
        del head
    torch.cuda.empty_cache()
    return out


def when(text: str | None) -> float:
    return datetime.fromisoformat(text).timestamp() if text else float("nan")


def run_job(client: Any, body: dict[str, Any], farm_cache: Path, thresholds: dict[str, float]) -> dict[str, Any]:
    """Submit one job (with an empty Triton cache), wait for it, and read the best-so-far curve.

    ``thresholds``: name -> a median time in ms; the result says when the best first got there.
    """
    shutil.rmtree(farm_cache / "triton", ignore_errors=True)  # a cold compile cache for this job
    submitted = time.time()
    job = client.submit(body)
    while job["state"] not in ("complete", "failed", "cancelled"):
        time.sleep(0.5)
        job = client.job(job["id"])
    finished = time.time()
    trials = client.all_trials(job["id"])
    done = sorted((t for t in trials if t["verified"] and t["time_ms"]), key=lambda t: when(t["finished_at"]))
    curve, best = [], float("inf")
    for t in done:
        if t["time_ms"] < best:
            best = t["time_ms"]
            curve.append({"at_s": when(t["finished_at"]) - submitted, "ms": best, "config": t["config"],
                          "trial": t["seq"]})  # fmt: skip
    reached = {name: next((p["at_s"] for p in curve if p["ms"] <= ms), None) for name, ms in thresholds.items()}
    failures: dict[str, int] = {}
    for t in trials:
        if t["failure_kind"]:
            failures[t["failure_kind"]] = failures.get(t["failure_kind"], 0) + 1
    compile_s = [t["metrics"].get("compile_s") for t in trials if t["metrics"].get("compile_s") is not None]
    return {
        "job_id": job["id"],
        "state": job["state"],
        "status": job.get("status_message"),
        "trials": len(trials),
        "verified": len(done),
        "failures": failures,
        "job_wall_s": finished - submitted,
        "best_ms": curve[-1]["ms"] if curve else None,
        "best_config": curve[-1]["config"] if curve else None,
        "best_found_at_s": curve[-1]["at_s"] if curve else None,
        "best_found_at_trial": curve[-1]["trial"] if curve else None,
        "reached_at_s": reached,
        "curve": curve,
        "compile_s_sum": sum(compile_s),
        "compile_s_max": max(compile_s, default=0.0),
        "compile_cached": sum(1 for t in trials if t["metrics"].get("compile_cached")),
        "compile_wait_s": sum(t["metrics"].get("compile_wait_s", 0.0) for t in trials),
        "gpu_s": sum(t["metrics"].get("gpu_s", 0.0) for t in trials),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, action="append", default=[])
    parser.add_argument("--budget", type=int, default=48)
    # Trials in flight per job: 8 gives the Bayesian strategy six rounds in 48 trials; the compile
    # processes still work 16 queued trials ahead.
    parser.add_argument("--parallelism", type=int, default=8)
    parser.add_argument("--strategy", default=None)
    parser.add_argument("--seed", type=int, action="append", default=[], help="one job per seed (default: 1)")
    parser.add_argument("--no-fused", action="store_true")
    parser.add_argument("--lm-head", action="store_true")
    parser.add_argument("--lm-head-budget", type=int, default=32)
    parser.add_argument("--cache-root", type=Path, default=Path(tempfile.gettempdir()) / "kf-triton-targets")
    parser.add_argument("--state-dir", type=Path, default=Path(tempfile.gettempdir()) / "kf-triton-stack")
    parser.add_argument("--out", type=Path, default=Path("triton-targets.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    sizes = args.size or [4096, 8192]
    seeds = args.seed or [1]
    farm_cache = cold_caches(args.cache_root)

    from kernelfarm.client import Client
    from kernelfarm.core.settings import Settings
    from kernelfarm.stack import WorkerPlan, start_stack, stop_stack
    from kernelfarm.worker.cuda.device import query_device

    report: dict[str, Any] = {"gpu": query_device(0).name, "budget": args.budget, "parallelism": args.parallelism,
                              "started": time.time(), "jobs": {}}  # fmt: skip
    report["baselines_before_ms"] = torch_baselines(sizes, args.lm_head)
    logger.info("baselines: %s", report["baselines_before_ms"])
    started = time.time()
    state = start_stack(Settings(), args.state_dir, WorkerPlan("triton", 1), timeout=300)
    report["stack_start_s"] = time.time() - started
    try:
        client = Client(state.api_url, state.token, timeout=60)
        model = client.workers()[0]["gpu_model"]
        base = {"gpu_model": model, "budget_trials": args.budget, "parallelism": args.parallelism,
                "profile": "none"} | ({"strategy": args.strategy} if args.strategy else {})  # fmt: skip
        for size, seed in itertools.product(sizes, seeds):
            cublas = report["baselines_before_ms"][f"cublas_{size}"]
            thresholds = {f"{pct}% of cuBLAS": cublas / (pct / 100) for pct in (90, 95, 95.6, 100, 105, 111)}
            problem = {"M": size, "N": size, "K": size, "dtype": "bfloat16", "b_layout": "kn"}
            result = run_job(client, base | {"kernel": "matmul_triton", "seed": seed, "problem": problem},
                             farm_cache, thresholds)  # fmt: skip
            result["fraction_of_cublas"] = cublas / result["best_ms"] if result["best_ms"] else None
            result["tflops"] = 2 * size**3 / (result["best_ms"] * 1e-3) / 1e12 if result["best_ms"] else None
            report["jobs"][f"matmul_{size}_seed{seed}"] = result
            logger.info("matmul %d: %s", size, {k: v for k, v in result.items() if k != "curve"})
            args.out.write_text(json.dumps(report, indent=2, default=str))
        for seed in [] if args.no_fused else seeds:
            unfused = report["baselines_before_ms"]["torch_unfused_gelu"]
            body = base | {"kernel": "matmul_bias_gelu_triton", "seed": seed}
            result = run_job(client, body, farm_cache, {"1.0x torch": unfused, "1.3x torch": unfused / 1.3})
            result["speedup_vs_unfused"] = unfused / result["best_ms"] if result["best_ms"] else None
            result["speedup_vs_addmm_gelu"] = (report["baselines_before_ms"]["torch_addmm_gelu"] / result["best_ms"]
                                               if result["best_ms"] else None)  # fmt: skip
            report["jobs"][f"fused_mlp_seed{seed}"] = result
            logger.info("fused: %s", {k: v for k, v in result.items() if k != "curve"})
            args.out.write_text(json.dumps(report, indent=2, default=str))
        if args.lm_head:
            problem = {"M": 4096, "N": 50257, "K": 768, "dtype": "bfloat16", "b_layout": "nk"}
            body = base | {"kernel": "matmul_triton", "budget_trials": args.lm_head_budget, "seed": seeds[0],
                           "problem": problem}  # fmt: skip
            head = report["baselines_before_ms"]["cublas_lm_head"]
            result = run_job(client, body, farm_cache, {"1.0x cuBLAS": head})
            flops = 2 * 4096 * 50257 * 768
            result["tflops"] = flops / (result["best_ms"] * 1e-3) / 1e12 if result["best_ms"] else None
            result["fraction_of_cublas"] = head / result["best_ms"] if result["best_ms"] else None
            report["jobs"]["lm_head"] = result
            args.out.write_text(json.dumps(report, indent=2, default=str))
    finally:
        stop_stack(args.state_dir)
    report["baselines_after_ms"] = torch_baselines(sizes, args.lm_head)
    args.out.write_text(json.dumps(report, indent=2, default=str))
    print_table(report)


def print_table(report: dict[str, Any]) -> None:
    print(f"\nGPU: {report['gpu']}; budget {report['budget']} trials, parallelism {report['parallelism']}")
    print("baselines before/after (ms):", {k: round(v, 4) for k, v in report["baselines_before_ms"].items()},
          {k: round(v, 4) for k, v in report.get("baselines_after_ms", {}).items()})  # fmt: skip
    for name, job in report["jobs"].items():
        reached = {k: (round(v, 1) if v is not None else None) for k, v in job["reached_at_s"].items()}
        extra = {k: round(job[k], 3) for k in ("fraction_of_cublas", "tflops", "speedup_vs_unfused",
                                               "speedup_vs_addmm_gelu") if job.get(k) is not None}  # fmt: skip
        print(
            f"{name}: best {job['best_ms']:.4f} ms at {job['best_found_at_s']:.1f} s (trial "
            f"{job['best_found_at_trial']}), {job['verified']}/{job['trials']} verified, failures {job['failures']}, "
            f"job {job['job_wall_s']:.1f} s; {extra}; reached (s): {reached}; best config {job['best_config']}"
        )


if __name__ == "__main__":
    main()
