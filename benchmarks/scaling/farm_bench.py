"""Scaling benchmark of the whole farm on one host with replay workers (issue 7 CPU part, issue 3 item 5).

Starts the real stack (embedded PostgreSQL and Redis, the API, the coordinator, N Celery replay
workers as separate processes), submits jobs over HTTP, waits for them, and reports from the
trials' database timestamps:

- trials per hour over the wall time (first trial started → last trial finished);
- GPU busy fraction = sum(finished_at - started_at) / (workers x wall) ("db"), and, with a fixed
  --sleep-ms and --time-scale 0, the pure sleep time / (workers x wall) ("nominal");
- per-worker idle gap between one trial's end and the same worker's next start;
- the coordinator's advance-step time and ask time (parsed from its log), and CPU seconds used
  by each component over the run (psutil), to see which one saturates.

Workers are added incrementally (4 → 8 → 16 → 32) on one stack so start-up is paid once; each
step submits fresh jobs whose parallelism equals the worker count.

    .venv/bin/python benchmarks/scaling/farm_bench.py --workers 4 8 --jobs 1 --json out.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import re
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

import httpx
import psutil

from kernelfarm import launcher
from kernelfarm.core.db import session_scope
from kernelfarm.core.migrate import upgrade
from kernelfarm.core.store.tokens import create_token
from kernelfarm.core.store.workers import live_workers
from kernelfarm.services import EmbeddedPostgres, EmbeddedRedis, free_port, wait_for
from kernelfarm.stack import ProcessInfo, api_ready, signal_group, spawn, stop_processes
from kernelfarm.testing.recordings import CONVOLUTION as LANDSCAPE
from kernelfarm.testing.recordings import RTX3090

logger = logging.getLogger("farm_bench")
ADVANCE_DONE = re.compile(r"Task tuner\.advance\[[^\]]+\] succeeded in ([0-9.e-]+)s")
ASK_LINE = re.compile(r"dispatched (\d+) trials \(ask (\d+) ms\)")


@dataclass
class RunResult:
    workers: int
    jobs: int
    strategy: str
    sleep_ms: float
    time_scale: float
    trials: int
    wall_s: float
    trials_per_hour: float
    busy_db: float
    busy_nominal: float | None
    # busy (db) over the middle 80 % of the wall time: without the first batch's start and the drain
    busy_steady: float
    mean_trial_s: float
    gap_median_ms: float
    gap_p90_ms: float
    # The gap split at the new trial's created_at (DB clock, start of the coordinator's transaction):
    # last result written → coordinator step began, and step began → a worker claimed the new trial.
    to_step_median_ms: float
    step_to_claim_median_ms: float
    reruns: int
    advance_steps: int
    advance_median_ms: float
    advance_p90_ms: float
    ask_median_ms: float
    trials_per_step: float
    cpu_cores: dict[str, float] = field(default_factory=dict)
    parallelism: int = 0  # per job
    load_avg_before: float = 0.0


class Stack:
    """One embedded farm whose worker count can grow between runs."""

    def __init__(self, directory: Path, sleep_ms: float, time_scale: float, coordinator_concurrency: int) -> None:
        self.directory = directory
        self.sleep_ms, self.time_scale = sleep_ms, time_scale
        self.coordinator_concurrency = coordinator_concurrency
        self.postgres = EmbeddedPostgres(directory / "pg")
        self.redis = EmbeddedRedis(directory / "redis")
        self.processes: list[ProcessInfo] = []
        self.workers: list[ProcessInfo] = []
        self.api_url = ""
        self.token = ""
        self.env: dict[str, str] = {}

    def start(self) -> None:
        self.postgres.start()
        self.redis.start()
        upgrade(self.postgres.url)
        with session_scope(self.postgres.url) as session:
            self.token = create_token(session, "bench", ["admin"])
        # Default timings (heartbeat 2 s, lease 15 s): the farm as deployed, not the test clocks.
        self.env = launcher.component_env(self.postgres.url, self.redis.url)
        port = free_port()
        self.api_url = f"http://127.0.0.1:{port}"
        self._spawn("api", launcher.api_argv(port))
        schedule = self.directory / "schedule"
        self._spawn("coordinator", launcher.coordinator_argv(schedule, concurrency=self.coordinator_concurrency))
        wait_for(lambda: api_ready(self.api_url), 90, "API")

    def _spawn(self, name: str, argv: list[str]) -> ProcessInfo:
        info = spawn(name, argv, self.env, self.directory / "logs")
        self.processes.append(info)
        return info

    def grow_to(self, count: int) -> None:
        while len(self.workers) < count:
            name = f"replay{len(self.workers)}"
            argv = launcher.worker_argv(name, landscapes=[LANDSCAPE], sleep_ms=self.sleep_ms,
                                        time_scale=self.time_scale, loglevel="WARNING")  # fmt: skip
            self.workers.append(self._spawn(name, argv))
        wait_for(lambda: self.live_workers() >= count, 60 + 4 * count, f"{count} live workers")

    def live_workers(self) -> int:
        with session_scope(self.postgres.url) as session:
            return len(live_workers(session, 15.0, RTX3090))

    def coordinator_log(self) -> Path:
        return self.directory / "logs" / "coordinator.log"

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds of each component's process tree (children included, live and reaped)."""
        groups: dict[str, list[int]] = defaultdict(list)
        for info in self.processes:
            kind = "workers" if info.name.startswith("replay") else info.name
            groups[kind].append(info.pid)
        groups["postgres"].append(_postmaster_pid(self.postgres.data_dir))
        groups["redis"].append(self.redis.pid or 0)
        return {kind: sum(_tree_cpu(pid) for pid in pids) for kind, pids in groups.items()}

    def stop(self) -> None:
        stop_processes(self.processes, grace=20)
        if self.redis.pid:
            signal_group(self.redis.pid, 15)
        self.postgres.stop("immediate")


def _postmaster_pid(data_dir: Path) -> int:
    try:
        return int((data_dir / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _tree_cpu(pid: int) -> float:
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for process in processes:
        try:
            t = process.cpu_times()
            # children_* count reaped children (Postgres backends that exited, Celery pool restarts).
            total += t.user + t.system + (t.children_user + t.children_system if process is root else 0.0)
        except psutil.Error:
            continue
    return total


def _ts(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_once(stack: Stack, workers: int, jobs: int, budget: int, strategy: str | None, seed: int,
             timeout: float, parallelism_factor: float = 1.0) -> RunResult:  # fmt: skip
    stack.grow_to(workers)
    time.sleep(2)  # let start-up CPU settle before measuring
    log_offset = stack.coordinator_log().stat().st_size
    cpu_before = stack.cpu_seconds()
    load_before = os.getloadavg()[0]
    client = httpx.Client(base_url=stack.api_url, headers={"Authorization": f"Bearer {stack.token}"}, timeout=60)
    body: dict[str, object] = {"kernel": "convolution_kernel", "gpu_model": RTX3090,
                               "budget_trials": budget // jobs,
                               # replay workers have no profiler: measure scheduling, not ncu batches
                               "profile": "none",
                               # the fleet split between the jobs: as many trials in flight as workers
                               "parallelism": max(1, round(-(-workers // jobs) * parallelism_factor))}  # fmt: skip
    if strategy:
        body["strategy"] = strategy
    job_ids, strategies = [], set()
    for index in range(jobs):
        created = client.post("/v1/jobs", json={**body, "seed": seed + index})
        created.raise_for_status()
        job_ids.append(created.json()["id"])
        strategies.add(created.json()["strategy"])  # what "default" resolved to at this commit
    started = time.monotonic()

    def finished() -> bool:
        states = [client.get(f"/v1/jobs/{job_id}").json()["state"] for job_id in job_ids]
        return all(state in ("complete", "failed", "cancelled") for state in states)

    wait_for(finished, timeout, f"{jobs} job(s) on {workers} workers", interval=1.0)
    elapsed = time.monotonic() - started
    cpu_after = stack.cpu_seconds()
    trials = [t for job_id in job_ids for t in _all_trials(client, job_id)]
    log_text = stack.coordinator_log().read_text(errors="replace")[log_offset:]
    label = ("default=" if not strategy else "") + "/".join(sorted(strategies))
    result = summarize(workers, jobs, label, stack.sleep_ms, stack.time_scale, trials, log_text)
    result.cpu_cores = {k: round((cpu_after.get(k, 0.0) - cpu_before.get(k, 0.0)) / elapsed, 3) for k in cpu_after}
    result.load_avg_before = load_before
    result.parallelism = int(body["parallelism"])  # type: ignore[call-overload]
    return result


def _all_trials(client: httpx.Client, job_id: str) -> list[dict]:
    items: list[dict] = []
    while True:
        page = client.get(f"/v1/jobs/{job_id}/trials", params={"limit": 1000, "offset": len(items)}).json()
        items += page["items"]
        if len(items) >= page["total"] or not page["items"]:
            return items


def summarize(workers: int, jobs: int, strategy: str, sleep_ms: float, time_scale: float, trials: list[dict],
              log_text: str) -> RunResult:  # fmt: skip
    done = [t for t in trials if t["started_at"] and t["finished_at"]]
    starts = [_ts(t["started_at"]) for t in done]
    ends = [_ts(t["finished_at"]) for t in done]
    wall = max(ends) - min(starts)
    busy_seconds = sum(e - s for s, e in zip(starts, ends, strict=True))
    nominal = None
    if time_scale == 0 and sleep_ms > 0:
        nominal = len(done) * sleep_ms / 1e3 / (workers * wall)
    by_worker: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for t, s, e in zip(done, starts, ends, strict=True):
        by_worker[t["worker_name"]].append((s, e))
    gaps = []
    for spans in by_worker.values():
        spans.sort()
        gaps += [(b[0] - a[1]) * 1e3 for a, b in itertools.pairwise(spans)]
    to_step, step_to_claim = _gap_split(done)
    advance = [float(m.group(1)) * 1e3 for m in ADVANCE_DONE.finditer(log_text)]
    asks = [(int(m.group(1)), float(m.group(2))) for m in ASK_LINE.finditer(log_text)]
    return RunResult(
        workers=workers, jobs=jobs, strategy=strategy, sleep_ms=sleep_ms, time_scale=time_scale,
        trials=len(done), wall_s=round(wall, 2), trials_per_hour=round(len(done) / wall * 3600),
        busy_db=round(busy_seconds / (workers * wall), 3),
        busy_nominal=round(nominal, 3) if nominal is not None else None,
        busy_steady=round(_steady_busy(starts, ends, workers), 3),
        mean_trial_s=round(busy_seconds / len(done), 3),
        gap_median_ms=round(statistics.median(gaps), 1) if gaps else float("nan"),
        gap_p90_ms=round(_percentile(gaps, 0.9), 1),
        to_step_median_ms=round(statistics.median(to_step), 1) if to_step else float("nan"),
        step_to_claim_median_ms=round(statistics.median(step_to_claim), 1) if step_to_claim else float("nan"),
        reruns=sum(1 for t in done if t["attempt"] > 1),
        advance_steps=len(advance),
        advance_median_ms=round(statistics.median(advance), 1) if advance else float("nan"),
        advance_p90_ms=round(_percentile(advance, 0.9), 1),
        ask_median_ms=round(statistics.median(a for _, a in asks), 1) if asks else float("nan"),
        trials_per_step=round(sum(n for n, _ in asks) / len(asks), 2) if asks else float("nan"),
    )  # fmt: skip


def _steady_busy(starts: list[float], ends: list[float], workers: int) -> float:
    first, last = min(starts), max(ends)
    lo, hi = first + 0.1 * (last - first), last - 0.1 * (last - first)
    inside = sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in zip(starts, ends, strict=True))
    return inside / (workers * (hi - lo))


def _gap_split(done: list[dict]) -> tuple[list[float], list[float]]:
    """For every trial created after the job's first batch: ms from the latest result written
    before its creation to its creation, and from its creation to its claim."""
    finishes = sorted(_ts(t["finished_at"]) for t in done)
    first_created = min(_ts(t["created_at"]) for t in done)
    to_step, step_to_claim = [], []
    for t in done:
        created = _ts(t["created_at"])
        earlier = [f for f in finishes if f <= created]
        if created <= first_created or not earlier:
            continue
        to_step.append((created - earlier[-1]) * 1e3)
        step_to_claim.append((_ts(t["started_at"]) - created) * 1e3)
    return to_step, step_to_claim


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, nargs="+", default=[4, 8, 16, 32])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1], help="concurrent jobs per run (each listed)")
    parser.add_argument("--trials-per-worker", type=int, default=30, help="budget = max(--min-budget, this x workers)")
    parser.add_argument("--min-budget", type=int, default=240)
    parser.add_argument("--sleep-ms", type=float, default=20.0)
    parser.add_argument("--time-scale", type=float, default=100.0)
    parser.add_argument("--strategy", default=None, help="job strategy; the farm's default when omitted")
    parser.add_argument(
        "--parallelism-factor",
        type=float,
        default=1.0,
        help="job parallelism = factor x workers/jobs; > 1 keeps trials queued ahead of the workers",
    )
    parser.add_argument("--coordinator-concurrency", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=240.0, help="per run")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the stack's directory (logs) afterwards")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)

    directory = Path(tempfile.mkdtemp(prefix="kf-scaling-"))
    stack = Stack(directory, args.sleep_ms, args.time_scale, args.coordinator_concurrency)
    results: list[RunResult] = []
    try:
        stack.start()
        for workers in sorted(args.workers):
            for jobs in args.jobs:
                budget = max(args.min_budget, args.trials_per_worker * workers)
                result = run_once(
                    stack, workers, jobs, budget, args.strategy, args.seed, args.timeout, args.parallelism_factor
                )
                results.append(result)
                logger.info("%s", json.dumps(asdict(result)))
                if args.json:  # written after every run: a later timeout keeps the earlier numbers
                    args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
    finally:
        stack.stop()
        if args.keep:
            logger.info("stack directory kept: %s", directory)
        else:
            shutil.rmtree(directory, ignore_errors=True)
    print(table(results))


def table(results: list[RunResult]) -> str:
    header = ("| workers | jobs | parallelism/job | strategy | trials | wall s | trials/h | busy (db) | busy (sleep) "
              "| busy (db, middle 80 %) "
              "| gap p50/p90 ms "
              "| result→step / step→claim p50 ms | advance steps | advance p50/p90 ms | ask p50 ms | trials/step "
              "| CPU cores: coord / pg / redis / "
              "api / workers |")  # fmt: skip
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for r in results:
        cpu = r.cpu_cores
        nominal = f"{r.busy_nominal:.3f}" if r.busy_nominal is not None else "—"
        lines.append(
            f"| {r.workers} | {r.jobs} | {r.parallelism} | {r.strategy} | {r.trials} | {r.wall_s:.1f} "
            f"| {r.trials_per_hour} "
            f"| {r.busy_db:.3f} | {nominal} | {r.busy_steady:.3f} | {r.gap_median_ms:.0f} / {r.gap_p90_ms:.0f} "
            f"| {r.to_step_median_ms:.0f} / {r.step_to_claim_median_ms:.0f} | {r.advance_steps} "
            f"| {r.advance_median_ms:.0f} / {r.advance_p90_ms:.0f} | {r.ask_median_ms:.0f} | {r.trials_per_step} "
            f"| {cpu.get('coordinator', 0):.2f} / {cpu.get('postgres', 0):.2f} / {cpu.get('redis', 0):.2f} / "
            f"{cpu.get('api', 0):.2f} / {cpu.get('workers', 0):.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
