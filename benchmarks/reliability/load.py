"""Load: best-config lookups (and job submissions) against a real API, from a separate generator process.

    python -m benchmarks.reliability.load --api-workers 2 --rate 200 --seconds 20

Starts its own farm (embedded PostgreSQL and Redis, the API under uvicorn, a coordinator, two replay
workers with the RTX 3090 recordings of convolution_kernel and cn_pnpoly), seeds both kernels with a
finished job, then runs each phase in a generator process (benchmarks/reliability/loadgen.py),
pinned to one CPU:

1. lookups: an open-loop schedule of ``rate`` GET /v1/best per second over ``clients`` keep-alive
   connections, alternating convolution_kernel (by model slug) and cn_pnpoly (by device name).
   Latency is measured from each request's SCHEDULED time, so a stalled server cannot hide
   queueing delay (no coordinated omission);
2. mixed (``--mixed-seconds``, default half of ``--seconds``): the same lookups plus ``submit_rate``
   POST /v1/jobs (cn_pnpoly) per second, whose trials complete during the phase and can change the
   looked-up answer; afterwards every 201 must be a stored job, and every stored job must complete
   (nothing lost);
3. ``--sweep 200,400,…``: lookups alone at each rate, for the highest rate the farm sustains.

Everything shares the machine: on the 2-core VM the generator, the API, PostgreSQL, Redis, the
coordinator and the workers compete for the same two cores. Each phase reports its throughput,
p50/p99/max latency, status counts, the CPU seconds of the generator, the API and PostgreSQL, how
busy the machine was, and how often a best-config stamp was bumped (cached answers invalidated).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
from sqlalchemy import create_engine, text

from benchmarks.reliability.loadgen import Spec
from kernelfarm.core.db import session_scope
from kernelfarm.core.store.best import answer_versions
from kernelfarm.core.store.tokens import create_token
from kernelfarm.services import wait_for
from kernelfarm.testing.chaos_farm import ChaosFarm
from kernelfarm.testing.recordings import CONVOLUTION, PNPOLY, RTX3090

logger = logging.getLogger("load")
# The generator runs as `python -m benchmarks.reliability.loadgen` from the repository root.
REPO = Path(__file__).resolve().parents[2]
LOOKUPS = [
    {"kernel": "convolution_kernel", "gpu": RTX3090},
    {"kernel": "cn_pnpoly", "gpu": "NVIDIA GeForce RTX 3090"},
]
SUBMIT = {"kernel": "cn_pnpoly", "gpu_model": RTX3090, "budget_trials": 3, "parallelism": 3, "strategy": "random",
          "profile": "none"}  # fmt: skip
SEED_PNPOLY_TRIALS = 5  # few, so that the mixed phase's jobs still find faster configs now and then
P99_TARGET_MS = 50.0


@dataclass
class PhaseResult:
    name: str
    offered_rps: float  # lookups + submissions scheduled per second
    requests: int
    errors_5xx: int  # 5xx, and 599 = connection error or 30 s timeout
    errors_other: int  # 4xx
    seconds: float  # first scheduled request to last answer
    throughput_rps: float
    p50_ms: float
    p99_ms: float  # lookups (the target); submissions have their own below
    max_ms: float
    statuses: dict[str, int]
    generator_cpu_s: float
    api_cpu_s: float
    postgres_cpu_s: float
    machine_busy: float  # fraction of all CPUs busy during the phase
    best_version_bumps: int
    submit_p50_ms: float | None = None
    submit_p99_ms: float | None = None
    submitted: int = 0
    stored: int = 0
    completed: int = 0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def tree_cpu_seconds(pid: int | None) -> float:
    """CPU seconds (user + system) of a process and its descendants, exited ones included (they
    are in their parent's children_* times: PostgreSQL backends come and go)."""
    if pid is None:
        return 0.0
    total = 0.0
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def postgres_pid(farm: ChaosFarm) -> int | None:
    assert farm.postgres is not None
    pid_file = farm.postgres.data_dir / "postmaster.pid"
    return int(pid_file.read_text().split()[0]) if pid_file.exists() else None


def total_bumps(farm: ChaosFarm) -> int:
    with session_scope(farm.database_url) as session:
        return sum(answer_versions(session).values())


def run_phase(name: str, farm: ChaosFarm, token: str, rate: float, seconds: float, clients: int,
              submit_rate: float = 0.0, cpu: int | None = None) -> PhaseResult:  # fmt: skip
    spec = Spec(api_url=farm.api_url, token=token, rate=rate, seconds=seconds, clients=clients, lookups=LOOKUPS,
                submit_rate=submit_rate, submit_body=SUBMIT, cpu=cpu)  # fmt: skip
    api_pid, pg_pid = farm.processes["api"].pid, postgres_pid(farm)
    bumps, api_cpu, pg_cpu = total_bumps(farm), tree_cpu_seconds(api_pid), tree_cpu_seconds(pg_pid)
    machine = psutil.cpu_times()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(asdict(spec), handle)
    try:
        done = subprocess.run([sys.executable, "-m", "benchmarks.reliability.loadgen", handle.name], check=True,
                              capture_output=True, text=True, cwd=REPO)  # fmt: skip
    finally:
        os.unlink(handle.name)
    after = psutil.cpu_times()
    busy = 1 - ((after.idle - machine.idle) + (after.iowait - machine.iowait)) / (sum(after) - sum(machine))
    outcome = json.loads(done.stdout)
    latencies: list[float] = outcome["latencies_ms"]
    statuses: dict[str, int] = outcome["statuses"]
    codes = [(int(key.split()[1]), n) for key, n in statuses.items()]
    requests = sum(n for _, n in codes)
    server_errors, client_errors = sum(n for c, n in codes if c >= 500), sum(n for c, n in codes if 400 <= c < 500)
    result = PhaseResult(
        name=name, offered_rps=rate + submit_rate, requests=requests, errors_5xx=server_errors,
        errors_other=client_errors,
        seconds=round(outcome["seconds"], 2), throughput_rps=round(requests / outcome["seconds"], 1),
        p50_ms=round(statistics.median(latencies), 2), p99_ms=round(percentile(latencies, 0.99), 2),
        max_ms=round(max(latencies), 2), statuses=dict(sorted(statuses.items())),
        generator_cpu_s=round(outcome["cpu_seconds"], 2), api_cpu_s=round(tree_cpu_seconds(api_pid) - api_cpu, 2),
        postgres_cpu_s=round(tree_cpu_seconds(pg_pid) - pg_cpu, 2), machine_busy=round(busy, 3),
        best_version_bumps=total_bumps(farm) - bumps, submitted=len(outcome["job_ids"]),
    )  # fmt: skip
    if submits := outcome["submit_latencies_ms"]:
        result.submit_p50_ms = round(statistics.median(submits), 2)
        result.submit_p99_ms = round(percentile(submits, 0.99), 2)
    if outcome["job_ids"]:
        result.stored, result.completed = _account(farm, outcome["job_ids"])
    logger.warning("%s", json.dumps(asdict(result)))
    return result


def _account(farm: ChaosFarm, job_ids: list[str]) -> tuple[int, int]:
    engine = create_engine(farm.database_url)

    def states() -> dict[str, str]:
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT id::text, state FROM jobs WHERE id::text = ANY(:ids)"),
                                      {"ids": job_ids}).all()  # fmt: skip
        return {r[0]: r[1] for r in rows}

    try:
        wait_for(lambda: all(s == "complete" for s in states().values()) and len(states()) == len(job_ids), 300,
                 "submitted jobs to complete", interval=1.0)  # fmt: skip
    except TimeoutError:
        logger.warning("not every submitted job completed in time")
    final = states()
    engine.dispose()
    return len(final), sum(1 for s in final.values() if s == "complete")


def seed_data(farm: ChaosFarm, token: str, trials: int) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    jobs = []
    for kernel, budget in (("convolution_kernel", trials), ("cn_pnpoly", SEED_PNPOLY_TRIALS)):
        body = {"kernel": kernel, "gpu_model": RTX3090, "budget_trials": budget, "parallelism": 8,
                "strategy": "random", "seed": 1, "profile": "none"}  # fmt: skip
        jobs.append(httpx.post(f"{farm.api_url}/v1/jobs", json=body, headers=headers, timeout=30).json()["id"])

    def all_complete() -> bool:
        states = [httpx.get(f"{farm.api_url}/v1/jobs/{job_id}", headers=headers, timeout=30).json()["state"]
                  for job_id in jobs]  # fmt: skip
        return all(state == "complete" for state in states)

    wait_for(all_complete, 600, "the seed jobs", interval=1.0)
    for query in LOOKUPS:  # both answer 200 before the clock starts
        response = httpx.get(f"{farm.api_url}/v1/best", params=query, headers=headers, timeout=30)
        response.raise_for_status()


def max_sustained(sweep: list[PhaseResult]) -> float | None:
    """The highest rate of the ascending sweep up to which every rate was served in full
    (throughput ≥ 98 % of the offered rate, no 5xx) at p99 < 50 ms."""
    best = None
    for r in sorted(sweep, key=lambda r: r.offered_rps):
        if r.throughput_rps < 0.98 * r.offered_rps or r.p99_ms >= P99_TARGET_MS or r.errors_5xx:
            break
        best = r.offered_rps
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api-workers", type=int, default=1, help="uvicorn worker processes")
    parser.add_argument("--rate", type=float, default=200.0, help="lookups per second")
    parser.add_argument("--seconds", type=float, default=20.0, help="lookup phase")
    parser.add_argument("--mixed-seconds", type=float, default=None, help="mixed phase (default: half of --seconds)")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--submit-rate", type=float, default=5.0, help="job submissions per second (mixed phase)")
    parser.add_argument("--seed-trials", type=int, default=300)
    parser.add_argument("--sweep", type=str, default="", help="comma-separated lookup rates to try after the phases")
    parser.add_argument("--sweep-seconds", type=float, default=10.0)
    parser.add_argument("--generator-cpu", type=int, default=(os.cpu_count() or 1) - 1, help="-1: not pinned")
    parser.add_argument("--no-cache", action="store_true", help="KERNELFARM_BEST_CACHE_SECONDS=0 for the API")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    # `timeout` and CI runners send SIGTERM: exit through the finally blocks that stop the farm.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(SystemExit(143)))
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    cpu = None if args.generator_cpu < 0 else args.generator_cpu
    extra = {"KERNELFARM_BEST_CACHE_SECONDS": "0"} if args.no_cache else {}
    farm = ChaosFarm(Path(tempfile.mkdtemp(prefix="kf-load-")), extra_env=extra)
    sweep: list[PhaseResult] = []
    try:
        farm.start_servers()
        with session_scope(farm.database_url) as session:
            token = create_token(session, "load", ["admin"])
        farm.start_api(workers=args.api_workers)
        farm.start_coordinator()
        for _ in range(2):
            farm.start_worker(landscapes=(CONVOLUTION, PNPOLY))
        seed_data(farm, token, args.seed_trials)
        mixed_seconds = args.seconds / 2 if args.mixed_seconds is None else args.mixed_seconds
        results = [
            run_phase("lookups", farm, token, args.rate, args.seconds, args.clients, cpu=cpu),
            run_phase("lookups+submits", farm, token, args.rate, mixed_seconds, args.clients, args.submit_rate, cpu),
        ]
        for rate in [float(r) for r in args.sweep.split(",") if r.strip()]:
            sweep.append(run_phase(f"sweep {rate:g}/s", farm, token, rate, args.sweep_seconds, args.clients, cpu=cpu))
    finally:
        farm.stop()
    report: dict[str, Any] = {
        "api_workers": args.api_workers, "rate": args.rate, "clients": args.clients, "cache": not args.no_cache,
        "generator_cpu": cpu, "cpus": os.cpu_count(), "phases": [asdict(r) for r in results],
        "sweep": [asdict(r) for r in sweep], "max_sustained_rps": max_sustained(sweep) if sweep else None,
    }  # fmt: skip
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
