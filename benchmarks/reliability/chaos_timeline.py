"""Where a chaos run's time goes: the chaos run of benchmarks/reliability/chaos.py, watched.

    python -m benchmarks.reliability.chaos_timeline --scale ci --defaults [--no-faults] [--json out.json]

The run is the harness's own (kernelfarm.testing.chaos.run, same plan, same faults); this script only
swaps in a farm that records what it does and samples it twice a second: worker processes alive,
workers registered live in the database (heartbeat within the TTL), the job's trials running and
queued, whether the coordinator process is up and consuming. Before the farm stops it reads the audit
trail (every trial transition, kernelfarm/testing/audit.py) for the time each killed worker's claimed
trials waited between the kill and their requeue. Nothing in the farm or the fault model changes.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import signal
import statistics
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from kernelfarm.core.settings import Settings
from kernelfarm.stack import ProcessInfo, alive
from kernelfarm.testing import chaos
from kernelfarm.testing.chaos_farm import ChaosFarm

SAMPLE_S = 0.5


class WatchedFarm(ChaosFarm):
    """The harness's farm, plus a sampler thread and a log of its kills and coordinator starts."""

    samples: list[dict[str, Any]]
    kills: list[tuple[float, str]]
    waits: list[dict[str, Any]]

    def start_servers(self) -> None:
        super().start_servers()
        self.samples, self.kills, self.waits = [], [], []
        self._ready_lines_before: dict[int, int] = {}
        self._stop = threading.Event()
        self._engine = create_engine(self.database_url, pool_pre_ping=True, pool_size=1)
        self._thread = threading.Thread(target=self._sample_loop, daemon=True)
        self._thread.start()

    def start_coordinator(self) -> ProcessInfo:
        info = super().start_coordinator()
        # Each start appends " ready." to its log once it consumes (a promoted spare's log is its own
        # file; a restart from nothing appends to the coordinator's): count only this start's.
        self._ready_lines_before[info.pid] = Path(info.log).read_text(errors="replace").count(" ready.")
        return info

    def _coordinator_serving(self, info: ProcessInfo | None) -> bool:
        if info is None or not alive(info.pid) or info.pid not in self._ready_lines_before:
            return False
        return Path(info.log).read_text(errors="replace").count(" ready.") > self._ready_lines_before[info.pid]

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        if sig == signal.SIGKILL:
            self.kills.append((time.time(), name))
        super().kill(name, sig)

    def _sample_loop(self) -> None:
        ttl = Settings().worker_ttl_seconds
        while not self._stop.wait(SAMPLE_S):
            processes = dict(self.processes)
            sample: dict[str, Any] = {
                "t": time.time(),
                "workers_alive": sum(1 for n, p in processes.items() if n.startswith("w") and alive(p.pid)),
                "coordinator_alive": "coordinator" in processes and alive(processes["coordinator"].pid),
                "coordinator_pid": processes["coordinator"].pid if "coordinator" in processes else None,
                "coordinator_serving": self._coordinator_serving(processes.get("coordinator")),
            }
            try:
                with self._engine.connect() as connection:
                    row = connection.execute(text(
                        "SELECT (SELECT count(*) FROM gpu_workers WHERE stopped_at IS NULL "
                        "        AND last_heartbeat > now() - make_interval(secs => :ttl)), "
                        "       count(*) FILTER (WHERE state = 'running'), count(*) FILTER (WHERE state = 'queued'), "
                        "       count(*) FILTER (WHERE state IN ('complete', 'failed')) FROM trials"
                    ), {"ttl": ttl}).one()  # fmt: skip
                    # profile requests ("all" profiles every successful trial): waiting for a worker
                    # to claim them, claimed and unanswered, answered
                    profiles = connection.execute(text(
                        "SELECT count(*) FILTER (WHERE profiled_at IS NULL AND claimed_at IS NULL), "
                        "       count(*) FILTER (WHERE profiled_at IS NULL AND claimed_at IS NOT NULL), "
                        "       count(*) FILTER (WHERE profiled_at IS NOT NULL) FROM trial_profiles"
                    )).one()  # fmt: skip
                    holders = (
                        connection.execute(
                            text("SELECT split_part(worker_name, '@', 1) FROM trials WHERE state = 'running'")
                        )
                        .scalars()
                        .all()
                    )
                    registered = set(
                        connection.execute(
                            text(
                                "SELECT split_part(name, '@', 1) FROM gpu_workers WHERE stopped_at IS NULL "
                                "AND last_heartbeat > now() - make_interval(secs => :ttl)"
                            ),
                            {"ttl": ttl},
                        ).scalars()
                    )
                living = {n for n, p in processes.items() if n.startswith("w") and alive(p.pid)}
                orphaned = sum(1 for h in holders if h not in living)  # running under a killed worker
                sample |= {"registered": row[0], "running": row[1], "queued": row[2], "finished": row[3],
                           "orphaned": orphaned, "serving": len(living & registered), "db": True,
                           "profiles_unclaimed": profiles[0], "profiles_claimed": profiles[1],
                           "profiles_done": profiles[2]}  # fmt: skip
            except Exception:  # the database is being restarted
                sample |= {"db": False}
            self.samples.append(sample)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        try:
            self._read_waits()
        except Exception:
            logging.exception("reading the audit trail failed")
        self._engine.dispose()
        super().stop()

    def _read_waits(self) -> None:
        """Each killed worker's trials: claimed under it, requeued (or failed) after the kill."""
        with self._engine.connect() as connection:
            for killed_at, name in self.kills:
                if not name.startswith("w"):
                    continue
                rows = connection.execute(text(
                    "SELECT t.trial_id, t.attempt, extract(epoch FROM t.at) AS at, t.new_state "
                    "FROM chaos_trial_transitions t "
                    "JOIN chaos_trial_transitions c ON c.trial_id = t.trial_id AND c.attempt = t.attempt "
                    "  AND c.new_state = 'running' AND split_part(c.worker_name, '@', 1) = :w "
                    "WHERE t.old_state = 'running' AND t.new_state IN ('queued', 'failed') "
                    "  AND t.at >= to_timestamp(:k) - interval '1 second'"
                ), {"w": name, "k": killed_at}).all()  # fmt: skip
                for trial_id, attempt, at, new_state in rows:
                    self.waits.append({"worker": name, "trial": trial_id, "attempt": attempt, "to": new_state,
                                       "wait_s": round(float(at) - killed_at, 2)})  # fmt: skip


def breakdown(farm: WatchedFarm, workers: int, job_start: float, job_end: float) -> dict[str, Any]:
    """Integrated over the job's span (sample period each): how much worker capacity was there."""
    inside = [s for s in farm.samples if job_start <= s["t"] <= job_end]
    db = [s for s in inside if s.get("db")]
    span = job_end - job_start

    def seconds(pred: Any, samples: list[dict[str, Any]] = inside) -> float:
        return round(SAMPLE_S * sum(1 for s in samples if pred(s)), 1)

    coordinator_serving = [s["coordinator_serving"] for s in inside]
    return {
        "job_seconds": round(span, 1),
        "samples": len(inside),
        "worker_slot_seconds": round(workers * span, 1),
        "alive_worker_seconds": round(SAMPLE_S * sum(s["workers_alive"] for s in inside), 1),
        "busy_worker_seconds": round(SAMPLE_S * sum(min(s["running"] - s["orphaned"], workers) for s in db), 1),
        "orphaned_trial_seconds": round(SAMPLE_S * sum(s["orphaned"] for s in db), 1),
        "seconds_no_serving_worker": seconds(lambda s: s["serving"] == 0, db),
        # a worker process alive but not measuring: starting up, or nothing queued for it
        "idle_alive_worker_seconds_nothing_queued": round(
            SAMPLE_S * sum(max(0, s["workers_alive"] - (s["running"] - s["orphaned"])) for s in db if s["queued"] == 0),
            1,
        ),
        "idle_alive_worker_seconds_while_queued": round(
            SAMPLE_S * sum(max(0, s["workers_alive"] - (s["running"] - s["orphaned"])) for s in db if s["queued"] > 0),
            1,
        ),
        "serving_worker_seconds": round(SAMPLE_S * sum(s["serving"] for s in db), 1),
        "missing_worker_seconds": round(SAMPLE_S * sum(max(0, workers - s["workers_alive"]) for s in inside), 1),
        "seconds_db_down": round(SAMPLE_S * (len(inside) - len(db)), 1),
        "seconds_coordinator_not_serving": round(SAMPLE_S * sum(1 for c in coordinator_serving if not c), 1),
        "killed_trial_waits_s": sorted(w["wait_s"] for w in farm.waits),
        "killed_trial_wait_median_s": statistics.median([w["wait_s"] for w in farm.waits]) if farm.waits else None,
        # replacements that were spares at their gates, and spares still starting when promoted
        "promoted_spares_ready": sum(farm.promotions),
        "promoted_spares_starting": len(farm.promotions) - sum(farm.promotions),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", choices=sorted(chaos.SCALES), default="ci")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--defaults", action="store_true")
    parser.add_argument(
        "--spares",
        type=int,
        default=None,
        help="warm spares of the workers (default: one per worker, as `kernelfarm up`; 0: none of any component)",
    )
    parser.add_argument(
        "--restart-delay",
        type=float,
        default=None,
        help="seconds from a kill to the replacement (default 0: `kernelfarm up` wakes on the death)",
    )
    parser.add_argument("--no-faults", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="write the samples and the breakdown here")
    args = parser.parse_args()
    plan = chaos.SCALES[args.scale]
    if args.defaults:
        plan = replace(plan, strategy=None, profile="all", fast_clocks=False)
    if args.spares is not None:
        plan = replace(plan, worker_spares=args.spares, coordinator_spares=min(args.spares, 1))
    if args.restart_delay is not None:
        plan = replace(plan, restart_delay_s=args.restart_delay)
    plan = replace(plan, faults=not args.no_faults)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(SystemExit(143)))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    farms: list[WatchedFarm] = []

    def farm_factory(*a: Any, **k: Any) -> WatchedFarm:
        farms.append(WatchedFarm(*a, **k))
        return farms[-1]

    chaos.ChaosFarm = farm_factory  # type: ignore[assignment,misc]  # run() builds its farm by this name
    directory = Path(tempfile.mkdtemp(prefix="kf-chaos-timeline-"))
    started = time.time()
    try:
        report, verdict = chaos.run(plan, directory, args.seed)
    finally:
        shutil.rmtree(directory, ignore_errors=True)  # servers' data and logs: the JSON keeps what counts
    farm = farms[0]
    # the job starts with the harness's clock (report.events are relative to it); its end from job_seconds
    first = next((s["t"] for s in farm.samples if s.get("db") and (s["running"] or s["queued"])), started)
    job_end = first + (report.job_seconds or report.seconds)
    result = {"verdict": verdict.ok, "verdict_detail": verdict.summary(), "job_seconds": report.job_seconds,
              "events": report.events, "unplanned_restarts": report.unplanned_restarts,
              "breakdown": breakdown(farm, plan.workers, first, job_end)}  # fmt: skip
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result | {"samples": farm.samples, "kills": farm.kills, "waits": farm.waits}))
    raise SystemExit(0 if verdict.ok else 1)


if __name__ == "__main__":
    main()
