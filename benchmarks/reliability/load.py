"""Load: best-config lookups (and job submissions) against a real API process, from this process.

    python -m benchmarks.reliability.load --api-workers 1 --rate 200 --seconds 20

Starts its own farm (embedded PostgreSQL and Redis, the API under uvicorn, a coordinator, replay
workers), fills the database with one finished replay job so lookups have data, then:

1. lookups: an open-loop schedule of ``rate`` GET /v1/best per second, spread over ``clients``
   concurrent connections; latency is measured from each request's SCHEDULED time, so a stalled
   server cannot hide queueing delay (no coordinated omission);
2. mixed: the same lookups plus ``submit_rate`` POST /v1/jobs per second; afterwards every 201 must
   be a stored job, and every stored job must complete (nothing lost).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text

from benchmarks.reliability.farm import RTX3090, ChaosFarm, wait_for
from core.db import session_scope
from core.store.tokens import create_token

logger = logging.getLogger("load")
LOOKUP = ("/v1/best", {"kernel": "convolution_kernel", "gpu": RTX3090})
SUBMIT = {"kernel": "cn_pnpoly", "gpu_model": RTX3090, "budget_trials": 3, "parallelism": 3, "strategy": "random",
          "profile": "none"}  # fmt: skip


@dataclass
class PhaseResult:
    name: str
    requests: int
    errors_5xx: int
    errors_other: int
    seconds: float
    throughput_rps: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    submitted: int = 0
    stored: int = 0
    completed: int = 0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def _phase(api_url: str, token: str, rate: float, seconds: float, clients: int,
                 submit_rate: float) -> tuple[list[float], list[int], list[str]]:  # fmt: skip
    latencies: list[float] = []
    statuses: list[int] = []
    job_ids: list[str] = []
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=api_url, headers=headers, limits=limits, timeout=30) as client:
        start = time.perf_counter() + 0.2
        lookups = [(start + i / rate, "lookup") for i in range(int(rate * seconds))]
        submits = [(start + i / submit_rate, "submit") for i in range(int(submit_rate * seconds))]
        schedule = sorted(lookups + submits)
        queue: asyncio.Queue[tuple[float, str]] = asyncio.Queue()
        for item in schedule:
            queue.put_nowait(item)

        async def client_loop() -> None:
            while not queue.empty():
                due, kind = queue.get_nowait()
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                try:
                    if kind == "lookup":
                        response = await client.get(LOOKUP[0], params=LOOKUP[1])
                        latencies.append((time.perf_counter() - due) * 1e3)
                    else:
                        response = await client.post("/v1/jobs", json=SUBMIT)
                        if response.status_code == 201:
                            job_ids.append(response.json()["id"])
                    statuses.append(response.status_code)
                except httpx.HTTPError:
                    statuses.append(599)

        await asyncio.gather(*(client_loop() for _ in range(clients)))
    return latencies, statuses, job_ids


def run_phase(name: str, farm: ChaosFarm, token: str, rate: float, seconds: float, clients: int,
              submit_rate: float = 0.0) -> PhaseResult:  # fmt: skip
    started = time.perf_counter()
    latencies, statuses, job_ids = asyncio.run(_phase(farm.api_url, token, rate, seconds, clients, submit_rate))
    elapsed = time.perf_counter() - started
    result = PhaseResult(
        name=name, requests=len(statuses), errors_5xx=sum(1 for s in statuses if s >= 500),
        errors_other=sum(1 for s in statuses if 400 <= s < 500), seconds=round(elapsed, 2),
        throughput_rps=round(len(statuses) / elapsed, 1), p50_ms=round(statistics.median(latencies), 2),
        p99_ms=round(percentile(latencies, 0.99), 2), max_ms=round(max(latencies), 2), submitted=len(job_ids),
    )  # fmt: skip
    if job_ids:
        result.stored, result.completed = _account(farm, job_ids)
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
    body = {"kernel": "convolution_kernel", "gpu_model": RTX3090, "budget_trials": trials, "parallelism": 8,
            "strategy": "random", "seed": 1, "profile": "none"}  # fmt: skip
    headers = {"Authorization": f"Bearer {token}"}
    job = httpx.post(f"{farm.api_url}/v1/jobs", json=body, headers=headers, timeout=30).json()
    wait_for(lambda: httpx.get(f"{farm.api_url}/v1/jobs/{job['id']}", headers=headers, timeout=30)
             .json()["state"] == "complete", 600, "the seed job", interval=1.0)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api-workers", type=int, default=1, help="uvicorn worker processes")
    parser.add_argument("--rate", type=float, default=200.0, help="lookups per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--submit-rate", type=float, default=5.0, help="job submissions per second (mixed phase)")
    parser.add_argument("--seed-trials", type=int, default=300)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    # `timeout` and CI runners send SIGTERM: exit through the finally blocks that stop the farm.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(SystemExit(143)))
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    farm = ChaosFarm(Path(tempfile.mkdtemp(prefix="kf-load-")))
    try:
        farm.start_servers()
        with session_scope(farm.database_url) as session:
            token = create_token(session, "load", ["admin"])
        farm.start_api(workers=args.api_workers)
        farm.start_coordinator()
        for _ in range(2):
            farm.start_worker()
        seed_data(farm, token, args.seed_trials)
        results = [
            run_phase("lookups", farm, token, args.rate, args.seconds, args.clients),
            run_phase("lookups+submits", farm, token, args.rate, args.seconds / 2, args.clients, args.submit_rate),
        ]
    finally:
        farm.stop()
    report: dict[str, Any] = {"api_workers": args.api_workers, "rate": args.rate, "clients": args.clients,
                              "phases": [asdict(r) for r in results]}  # fmt: skip
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
