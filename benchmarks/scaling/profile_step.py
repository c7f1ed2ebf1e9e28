"""Where one coordinator step and one worker trial spend their time, without Celery in the way.

In one process against an embedded PostgreSQL and Redis: a job is created, a live worker is
registered, and then, step by step, ``coordinator.advance`` is called with a dispatch stub while
``runner``'s store calls (claim, record_result) play the workers. For every step it records the
wall time, the time inside SQL statements and their count (a SQLAlchemy cursor hook), and the
optimizer's ask time; for every trial the claim and result round-trips. A cProfile of the steps
at the largest history says which functions the rest goes to. Also times ``send_task`` to Redis.

    .venv/bin/python benchmarks/scaling/profile_step.py --trials 400 --parallelism 8 --strategy random
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event

from kernelfarm.core.db import get_engine, session_scope
from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.core.migrate import upgrade
from kernelfarm.core.settings import get_settings
from kernelfarm.core.store import trials as trial_store
from kernelfarm.core.store import workers as worker_store
from kernelfarm.services import EmbeddedPostgres, EmbeddedRedis

RTX3090 = "nvidia-geforce-rtx-3090"


class SqlMeter:
    """Counts statements and the time spent executing them on one engine."""

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self._started: list[float] = []

    def attach(self, engine: Any) -> None:
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)
        # commit/rollback/pre-ping are round-trips too but not cursor executes: time them via the pool.
        event.listen(engine, "commit", self._count_only)

    def _before(self, *_: Any) -> None:
        self._started.append(time.perf_counter())

    def _after(self, *_: Any) -> None:
        self.seconds += time.perf_counter() - self._started.pop()
        self.count += 1

    def _count_only(self, *_: Any) -> None:
        self.count += 1

    @contextmanager
    def window(self) -> Iterator[dict[str, float]]:
        count, seconds = self.count, self.seconds
        out: dict[str, float] = {}
        started = time.perf_counter()
        yield out
        out["wall_ms"] = (time.perf_counter() - started) * 1e3
        out["sql_ms"] = (self.seconds - seconds) * 1e3
        out["statements"] = self.count - count


def make_job(strategy: str | None, budget: int, parallelism: int) -> str:
    from kernelfarm.api.jobs_service import create_job
    from kernelfarm.api.schemas import JobCreate

    body: dict[str, Any] = {"kernel": "convolution_kernel", "gpu_model": RTX3090, "budget_trials": budget,
                            "parallelism": parallelism, "seed": 11, "profile": "none"}  # fmt: skip
    if strategy:
        body["strategy"] = strategy
    with session_scope() as session:
        job = create_job(session, JobCreate(**body), "profile", get_settings())
        job_id = str(job.id)
        worker_store.register_worker(
            session,
            worker_store.WorkerIdentity(name="profile@host", hostname="host", backend="replay", gpu_model=RTX3090,
                                        gpu_name="NVIDIA GeForce RTX 3090", queue=f"gpu.{RTX3090}"),
        )  # fmt: skip
    return job_id


def play(job_id: str, budget: int, parallelism: int, meter: SqlMeter, profile_from: int) -> dict[str, Any]:
    from kernelfarm.tuner import coordinator

    settings = get_settings()
    queue: list[int] = []
    steps: list[dict[str, float]] = []
    claims: list[dict[str, float]] = []
    records: list[dict[str, float]] = []
    profiler = cProfile.Profile()
    finished = 0
    measurement = Measurement(timing=TimingStats.from_times([1.0, 1.1, 0.9]), verified=True)
    while finished < budget:
        with session_scope() as session:  # keep the one live worker live
            worker_store.heartbeat_worker(session, "profile@host")
        profiling = finished >= profile_from
        with meter.window() as step:
            if profiling:
                profiler.enable()
            result = coordinator.advance(job_id, settings, lambda trial_id, _model: queue.append(trial_id))
            if profiling:
                profiler.disable()
        step["ask_ms"] = result.ask_seconds * 1e3
        step["profiled"] = profiling
        step["history_orm_ms"], step["history_columns_ms"] = _history_costs(job_id)
        step["history"] = finished
        step["dispatched"] = len(result.dispatched)
        steps.append(step)
        if not queue:
            break
        # One worker finishes one trial per step: the farm's steady state (one result → one step).
        trial_id = queue.pop(0)
        with meter.window() as claim_window, session_scope() as session:
            claim = trial_store.claim(session, trial_id, "profile@host", None)
        claims.append(claim_window)
        assert claim is not None
        with meter.window() as record_window, session_scope() as session:
            trial_store.record_result(session, claim.trial_id, claim.attempt, measurement)
        records.append(record_window)
        finished += 1
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(25)
    return {"steps": steps, "claims": claims, "records": records, "profile": text.getvalue()}


def _history_costs(job_id: str) -> tuple[float, float]:
    """ms to load the job's history as today (whole ORM rows, JSON blobs decoded) and as the
    optimizer needs it (config, state, time, verified, failure kind only)."""
    from sqlalchemy import select

    from kernelfarm.core.models import Trial

    with session_scope() as session:
        started = time.perf_counter()
        trial_store.history(session, job_id)  # type: ignore[arg-type]
        orm = time.perf_counter() - started
        started = time.perf_counter()
        session.execute(
            select(Trial.config, Trial.state, Trial.time_ms, Trial.verified, Trial.failure_kind)
            .where(Trial.job_id == job_id)
            .order_by(Trial.seq)
        ).all()
        columns = time.perf_counter() - started
    return orm * 1e3, columns * 1e3


def send_task_latency(redis_url: str, n: int = 200) -> float:
    from kernelfarm.core.celery_app import make_celery

    app = make_celery(get_settings())
    app.send_task("kernelfarm.noop", args=[0], queue="profile")  # connect once
    started = time.perf_counter()
    for i in range(n):
        app.send_task("kernelfarm.noop", args=[i], queue="profile")
    return (time.perf_counter() - started) / n * 1e3


def summarize(steps: list[dict[str, float]], lo: int, hi: int) -> dict[str, float]:
    window = [s for s in steps if lo <= s["history"] < hi and s["dispatched"] > 0 and not s["profiled"]]
    if not window:
        return {}
    keys = ("wall_ms", "sql_ms", "statements", "ask_ms", "history_orm_ms", "history_columns_ms")
    return {key: round(statistics.median(s[key] for s in window), 2) for key in keys}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--parallelism", type=int, default=8)
    parser.add_argument("--strategy", default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    directory = Path(tempfile.mkdtemp(prefix="kf-profile-"))
    postgres, redis = EmbeddedPostgres(directory / "pg"), EmbeddedRedis(directory / "redis")
    try:
        postgres.start()
        redis.start()
        upgrade(postgres.url)
        os.environ.update({"DATABASE_URL": postgres.url, "REDIS_URL": redis.url})
        get_settings.cache_clear()
        meter = SqlMeter()
        meter.attach(get_engine())
        job_id = make_job(args.strategy, args.trials, args.parallelism)
        played = play(job_id, args.trials, args.parallelism, meter, profile_from=args.trials - 40)
        buckets = [(0, 50), (50, 200), (200, 500), (500, 1000), (1000, 5000)]
        report = {
            "strategy": args.strategy or "default",
            "parallelism": args.parallelism,
            "step_by_history": {f"{lo}-{hi}": summarize(played["steps"], lo, hi) for lo, hi in buckets},
            "claim": {k: round(statistics.median(c[k] for c in played["claims"]), 2)
                      for k in ("wall_ms", "sql_ms", "statements")},
            "record": {k: round(statistics.median(c[k] for c in played["records"]), 2)
                       for k in ("wall_ms", "sql_ms", "statements")},
            "send_task_ms": round(send_task_latency(redis.url), 3),
        }  # fmt: skip
        print(json.dumps(report, indent=2))
        print(played["profile"])
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))
    finally:
        if redis.pid:
            os.kill(redis.pid, 15)
        postgres.stop("immediate")
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
