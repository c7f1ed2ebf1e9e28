"""Chaos run: one replay tuning job through worker kills, coordinator kills, a Redis flush-and-
restart, a PostgreSQL restart, an API restart and a worker stopped past its lease (target scale);
then check that every trial was counted once.

``run(SCALES["target"], directory)`` is the benchmark (benchmarks/reliability/chaos.py: 1044 trials, 100
worker kills, ...); ``SCALES["ci"]`` is the scaled-down run the test suite uses.

Faults are triggered by progress (fraction of the job's trials finished) plus a random delay, so
every planned fault lands while the job is running whatever the machine's speed. Kills are kill -9.
Everything runs on servers the run starts in its own directory (see chaos_farm.py).
"""

from __future__ import annotations

import logging
import random
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text

from kernelfarm.core.db import session_scope
from kernelfarm.core.settings import Settings
from kernelfarm.core.store.tokens import create_token
from kernelfarm.core.store.workers import live_workers
from kernelfarm.services import wait_for
from kernelfarm.testing.audit import Expected, Verdict, expected_outcomes, install_audit, verify
from kernelfarm.testing.chaos_farm import ChaosFarm
from kernelfarm.testing.recordings import CONVOLUTION, RTX3090

logger = logging.getLogger(__name__)
KERNEL = "convolution_kernel"
# How long past its trials' lease a paused worker stays stopped.
PAUSE_PAST_LEASE_S = 2.0


@dataclass(frozen=True)
class ChaosPlan:
    parameters: dict[str, list[Any]] = field(default_factory=lambda: {"read_only": [0], "use_padding": [1]})
    constraints: tuple[str, ...] = ("tile_size_x * tile_size_y <= 14",)  # 1044 valid configs
    workers: int = 4
    sleep_ms: float = 150.0
    parallelism: int = 8
    worker_kills: int = 100
    coordinator_kills: int = 3
    redis_restarts: int = 1
    postgres_restarts: int = 1
    api_restarts: int = 1
    # A worker stopped (SIGSTOP) past its trials' lease, then let go on (SIGCONT): alive and holding
    # its presence lock, so only the lease frees its trials, and its late results must change nothing.
    worker_pauses: int = 1
    seed: int = 7
    timeout_s: float = 1500.0
    # The job's strategy (None: the farm's default) and profile mode, and whether the components run
    # with the harness's fast clocks (kernelfarm/testing/clocks.py) or the farm's default settings.
    strategy: str | None = "random"
    profile: str = "none"
    fast_clocks: bool = True
    # False: the same job on the same farm without any fault (the baseline a fault run is compared to).
    faults: bool = True
    # Warm spares (core/standby.py) of the workers (None: one per worker) and of the coordinator,
    # as `kernelfarm up` keeps one of each component: a replacement is a promoted spare. 0: every
    # replacement starts from nothing.
    worker_spares: int | None = None
    coordinator_spares: int = 1
    # Seconds between a killed component's death and its replacement: the supervisor's reaction.
    # `kernelfarm up` wakes on the death itself (Supervisor.wait, a pidfd per component), so 0; the
    # harness paused 1 s before a coordinator's replacement until the sixth session, when `up`
    # polled every 0.5 s.
    restart_delay_s: float = 0.0


SCALES = {
    "target": ChaosPlan(),
    # The CI version: same code, a 144-config space and fewer faults of every class.
    "ci": ChaosPlan(
        parameters={"read_only": [0], "use_padding": [1], "tile_size_x": [1, 2], "tile_size_y": [1, 2]},
        constraints=(),
        workers=3,
        sleep_ms=100.0,
        parallelism=6,
        worker_kills=6,
        coordinator_kills=1,
        # A pause past the 15 s default lease cannot fit a 6 s job (tests/reliability/test_dead_worker.py
        # has a stopped worker on its own).
        worker_pauses=0,
        timeout_s=150.0,
    ),
}


@dataclass
class ChaosReport:
    plan: dict[str, Any]
    events: list[tuple[float, str]]
    seconds: float
    verdict: dict[str, Any]
    # Components that died on their own and were restarted by the harness's supervisor.
    unplanned_restarts: list[str] = field(default_factory=list)
    # From the job's creation to its end, by the database clock (``seconds`` also covers faults
    # that fire after the job ended: their progress thresholds are reached by the last trials).
    job_seconds: float | None = None


def schedule(plan: ChaosPlan, rng: random.Random) -> list[tuple[float, str]]:
    """(progress fraction, fault) pairs, sorted. Broker, database and API faults sit at fixed points
    so they never coincide with each other; worker and coordinator kills are spread at random."""
    events = [(rng.uniform(0.02, 0.95), "kill-worker") for _ in range(plan.worker_kills)]
    events += [(rng.uniform(0.05, 0.9), "kill-coordinator") for _ in range(plan.coordinator_kills)]
    events += [(0.3 + 0.05 * i, "flush-restart-redis") for i in range(plan.redis_restarts)]
    events += [(0.45 + 0.05 * i, "restart-api") for i in range(plan.api_restarts)]
    events += [(0.6 + 0.05 * i, "restart-postgres") for i in range(plan.postgres_restarts)]
    events += [(0.5 + 0.05 * i, "pause-worker") for i in range(plan.worker_pauses)]
    return sorted(events)


def finished_trials(database_url: str, job_id: str) -> int | None:
    try:
        engine = _engine(database_url)
        with engine.connect() as connection:
            return int(connection.execute(
                text("SELECT count(*) FROM trials WHERE job_id = :j AND state IN ('complete', 'failed')"), {"j": job_id}
            ).scalar_one())  # fmt: skip
    except Exception:  # the database is being restarted
        return None


_engines: dict[str, Any] = {}


def _engine(url: str) -> Any:
    if url not in _engines:
        _engines[url] = create_engine(url, pool_pre_ping=True)
    return _engines[url]


def job_state(database_url: str, job_id: str) -> str | None:
    try:
        with _engine(database_url).connect() as connection:
            return str(connection.execute(text("SELECT state FROM jobs WHERE id = :j"), {"j": job_id}).scalar_one())
    except Exception:
        return None


def live_worker_count(database_url: str) -> int:
    with session_scope(database_url) as session:
        return len(live_workers(session, Settings().worker_ttl_seconds))


def job_duration(database_url: str, job_id: str) -> float | None:
    with _engine(database_url).connect() as connection:
        value = connection.execute(
            text("SELECT extract(epoch FROM finished_at - created_at) FROM jobs WHERE id = :j"), {"j": job_id}
        ).scalar_one()
    return None if value is None else round(float(value), 1)


def apply(farm: ChaosFarm, fault: str, plan: ChaosPlan, rng: random.Random) -> None:
    if fault == "kill-worker":
        workers = farm.workers()
        if workers:
            farm.kill(rng.choice(workers), signal.SIGKILL)
        time.sleep(plan.restart_delay_s)
        farm.start_worker(plan.sleep_ms)
    elif fault == "kill-coordinator":
        farm.kill("coordinator", signal.SIGKILL)
        time.sleep(plan.restart_delay_s)
        farm.start_coordinator()
    elif fault == "flush-restart-redis":
        farm.flush_and_restart_redis()
    elif fault == "restart-postgres":
        farm.restart_postgres(down_seconds=2.0)
    elif fault == "restart-api":
        farm.kill("api", signal.SIGKILL)
        farm.start_api()
    elif fault == "pause-worker":
        workers = farm.workers()
        if workers:
            farm.pause(rng.choice(workers), seconds=lease_seconds(farm) + PAUSE_PAST_LEASE_S)
    else:
        raise ValueError(fault)


def lease_seconds(farm: ChaosFarm) -> float:
    return float(farm.env().get("KERNELFARM_LEASE_SECONDS", Settings().lease_seconds))


def submit(farm: ChaosFarm, token: str, plan: ChaosPlan, total: int) -> str:
    body = {"kernel": KERNEL, "gpu_model": RTX3090, "budget_trials": total, "parallelism": plan.parallelism,
            "seed": plan.seed, "profile": plan.profile,
            "space": {"parameters": plan.parameters, "constraints": list(plan.constraints)}}  # fmt: skip
    if plan.strategy is not None:
        body["strategy"] = plan.strategy
    response = httpx.post(f"{farm.api_url}/v1/jobs", json=body, headers={"Authorization": f"Bearer {token}"},
                          timeout=30)  # fmt: skip
    response.raise_for_status()
    return str(response.json()["id"])


def api_best(farm: ChaosFarm, token: str, job_id: str) -> dict[str, Any] | None:
    job = httpx.get(f"{farm.api_url}/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    job.raise_for_status()
    best = job.json().get("best")
    return dict(best) if best else None


def run(plan: ChaosPlan, directory: Path, rng_seed: int = 1) -> tuple[ChaosReport, Verdict]:
    rng = random.Random(rng_seed)
    expected: Expected = expected_outcomes(CONVOLUTION, KERNEL, plan.parameters, list(plan.constraints))
    total = len(expected.outcomes)
    worker_spares = plan.workers if plan.worker_spares is None else plan.worker_spares
    farm = ChaosFarm(directory, fast_clocks=plan.fast_clocks, worker_spares=worker_spares,
                     coordinator_spares=plan.coordinator_spares)  # fmt: skip
    events_done: list[tuple[float, str]] = []
    try:
        farm.start_servers()
        install_audit(farm.database_url)
        with session_scope(farm.database_url) as session:
            token = create_token(session, "chaos", ["admin"])
        farm.start_api()
        farm.start_coordinator()
        for _ in range(plan.workers):
            farm.start_worker(plan.sleep_ms)
        # The clock starts once the workers and the coordinator serve: their start-up (seconds on a
        # loaded 2-core VM, and varying) is not the job's time, and would blur a fault-free/faulted
        # comparison (the coordinator's alone was 4-6 s of a 10 s fault-free CI-scale job).
        wait_for(lambda: live_worker_count(farm.database_url) >= plan.workers, 180, "the workers")
        wait_for(farm.coordinator_ready, 180, "the coordinator")
        wait_for(farm.spares_standing_by, 180, "the spares")
        started = time.monotonic()
        job_id = submit(farm, token, plan, total)
        pending = schedule(plan, rng) if plan.faults else []
        while time.monotonic() - started < plan.timeout_s:
            done = finished_trials(farm.database_url, job_id)
            if done is not None:
                while pending and done >= pending[0][0] * total:
                    _, fault = pending.pop(0)
                    time.sleep(rng.uniform(0.0, 0.3))  # a random moment, usually mid-trial
                    apply(farm, fault, plan, rng)
                    events_done.append((round(time.monotonic() - started, 2), fault))
                    logger.info("%6.1f s  %4d/%d finished  %s", time.monotonic() - started, done, total, fault)
            farm.resume_due()
            if not pending and job_state(farm.database_url, job_id) in ("complete", "failed", "cancelled"):
                break
            farm.supervise()
            time.sleep(0.1)
        seconds = time.monotonic() - started
        wait_for(farm.api_ready, 30, "the API")
        job_seconds = job_duration(farm.database_url, job_id)
        verdict = verify(farm.database_url, job_id, expected, api_best(farm, token, job_id))
    finally:
        farm.stop()
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()
    report = ChaosReport(plan=asdict(plan), events=events_done, seconds=round(seconds, 1), verdict=verdict.summary(),
                         unplanned_restarts=farm.unplanned_restarts, job_seconds=job_seconds)  # fmt: skip
    return report, verdict
