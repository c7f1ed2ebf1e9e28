"""The energy objective on a real GPU, through the whole farm (issue 17, item 4).

Starts the embedded stack with one cuda worker, and for each kernel submits a job per
``--objective`` (default: one that minimizes ``energy`` and one ``time+energy``, a Pareto front;
add ``time`` to see that a time job's trials are not metered) over the REST API, waits, and
records every trial's time, its GPU seconds and the meter's (``energy_s``), energy per launch
(NVML's total-energy counter over windows of back-to-back launches after the timed repetitions;
worker/measuring/energy.py), power and clocks, then asks /v1/best with ``objective=energy``,
``objective=pareto`` and the default ``time``. No profiling (ncu would only cost time here).

Run on the GPU machine from the repository root, kernelfarm and its dependencies importable:
    python3 benchmarks/gpu/energy_farm.py --kernel matmul_fp32 --kernel layernorm --budget 24 --out DIR
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path
from typing import Any

from kernelfarm.client import ApiError, Client
from kernelfarm.core.settings import Settings
from kernelfarm.stack import WorkerPlan, start_stack, stop_stack
from kernelfarm.worker.measuring.energy import ENERGY_METRICS

logger = logging.getLogger("energy_farm")
OBJECTIVES = ("energy", "time+energy")
COST = ("gpu_s", "measure_wall_s", "energy_s")  # what a trial cost the GPU, and the meter's part of it


def wait(client: Client, job: dict[str, Any], timeout: float) -> dict[str, Any]:
    end = time.time() + timeout
    while job["state"] not in ("complete", "failed", "cancelled") and time.time() < end:
        time.sleep(0.5)
        job = client.job(job["id"])
    return job


def trial_rows(client: Client, job_id: str) -> list[dict[str, Any]]:
    keep = (*ENERGY_METRICS, *COST)
    return [
        {"config": t["config"], "state": t["state"], "failure": t.get("failure_kind"), "time_ms": t.get("time_ms"),
         **{k: t["metrics"].get(k) for k in keep}}
        for t in client.all_trials(job_id)
    ]  # fmt: skip


def summary(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """Per job: trials, how many carry an energy reading, and the medians of what they cost."""
    done = [t for t in trials if t["state"] == "complete"]

    def median(key: str) -> float | None:
        values = [t[key] for t in done if t.get(key) is not None]
        return round(statistics.median(values), 4) if values else None

    metered = sum(t.get("energy_mj") is not None for t in trials)
    return {"trials": len(trials), "complete": len(done), "with_energy": metered,
            **{f"{k}_median": median(k) for k in COST}}  # fmt: skip


def best(client: Client, kernel: str, gpu: str, objective: str) -> dict[str, Any]:
    try:
        return client._call("GET", "/v1/best", params=[("kernel", kernel), ("gpu", gpu), ("objective", objective)])  # type: ignore[no-any-return]
    except ApiError as exc:
        return {"error": exc.message}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", action="append", default=[])
    parser.add_argument("--objective", action="append", default=[], choices=["time", *OBJECTIVES])
    parser.add_argument("--budget", type=int, default=24)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--job-timeout", type=float, default=150)
    parser.add_argument("--state-dir", type=Path, default=Path("/tmp/kf-energy"))
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    out = args.out / "energy_farm.json"
    report: dict[str, Any] = {"settings": {k: str(v) for k, v in vars(args).items() if k not in ("out", "state_dir")},
                              "jobs": [], "best": {}}  # fmt: skip
    started = time.time()
    state = start_stack(Settings(), args.state_dir, WorkerPlan("cuda", 1), timeout=300)
    report["stack_up_s"] = round(time.time() - started, 1)
    try:
        client = Client(state.api_url, state.token, timeout=60)
        worker = client.workers()[0]
        gpu = worker["gpu_model"]
        report["gpu_model"] = gpu
        for kernel in args.kernel or ["matmul_fp32", "layernorm"]:
            for objective in args.objective or OBJECTIVES:
                t0 = time.time()
                body = {"kernel": kernel, "gpu_model": gpu, "budget_trials": args.budget, "seed": args.seed,
                        "parallelism": args.parallelism, "profile": "none", "objective": objective}  # fmt: skip
                job = wait(client, client.submit(body), args.job_timeout)
                entry = {"kernel": kernel, "objective": objective, "job_id": job["id"], "state": job["state"],
                         "status": job.get("status_message"), "wall_s": round(time.time() - t0, 1),
                         "trials": trial_rows(client, job["id"])}  # fmt: skip
                entry["summary"] = summary(entry["trials"])
                report["jobs"].append(entry)
                logger.info("%s %s: %s, %.0f s, %s", kernel, objective, job["state"], entry["wall_s"],
                            json.dumps(entry["summary"]))  # fmt: skip
                out.write_text(json.dumps(report, indent=1, default=str) + "\n")  # partial results survive a timeout
            report["best"][kernel] = {o: best(client, kernel, gpu, o) for o in ("time", "energy", "pareto")}
            out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    finally:
        stop_stack(args.state_dir)
    print(json.dumps(report["best"], indent=1, default=str)[:6000])


if __name__ == "__main__":
    main()
