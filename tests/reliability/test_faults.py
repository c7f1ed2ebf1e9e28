"""Duplicate delivery and skewed worker clocks, on real processes: each trial is claimed once,
written once, and never reaped while its worker is alive. And the harness's own supervisor."""

from __future__ import annotations

import re
import signal
import uuid
from pathlib import Path

from kernelfarm.services import wait_for
from kernelfarm.stack import alive, signal_group
from kernelfarm.testing.chaos_farm import ChaosFarm
from tests.reliability.conftest import make_job, send_evaluate, terminal_transitions, trial_rows, valid_configs

SKEW_DIR = Path(__file__).resolve().parent / "skew"


def all_finished(farm: ChaosFarm, job_id: uuid.UUID) -> bool:
    return all(r.state in ("complete", "failed") for r in trial_rows(farm.database_url, job_id))


def test_every_task_delivered_three_times_is_counted_once(own_farm: ChaosFarm) -> None:
    workers = [own_farm.start_worker(sleep_ms=300) for _ in range(2)]
    try:
        job_id, trial_ids = make_job(own_farm.database_url, valid_configs(4, offset=30))
        for trial_id in trial_ids:
            send_evaluate(own_farm, trial_id, times=3)
        wait_for(lambda: all_finished(own_farm, job_id), 90, "all trials")
        wait_for(lambda: sum(own_farm.log(w.name).count("not claimable") for w in workers) >= 8, 30, "duplicates")
        rows = trial_rows(own_farm.database_url, job_id)
        assert [r.state for r in rows] == ["complete"] * 4 and all(r.attempt == 1 for r in rows)
        assert all(terminal_transitions(own_farm.database_url, t) == 1 for t in trial_ids)
    finally:
        for info in workers:
            own_farm.kill(info.name)


def test_a_worker_clock_hours_off_changes_nothing(own_farm: ChaosFarm) -> None:
    """Leases are stamped and judged by the database clock, so a worker whose clock is 6 h ahead
    (and another 6 h behind) is neither reaped nor allowed to outlive its lease. The skew is applied
    by skew/sitecustomize.py (time.time in the whole worker process: kombu, Celery, logging)."""
    # PYTHONPATH names only the directory of sitecustomize.py: the worker's own code still comes from
    # the installed package.
    pythonpath = str(SKEW_DIR)
    ahead = own_farm.start_worker(sleep_ms=2500, PYTHONPATH=pythonpath, KERNELFARM_TEST_CLOCK_SKEW_SECONDS="21600")
    behind = own_farm.start_worker(sleep_ms=2500, PYTHONPATH=pythonpath, KERNELFARM_TEST_CLOCK_SKEW_SECONDS="-21600")
    own_farm.start_coordinator()  # the reaper (lease 4 s): it must not take these trials away
    try:
        job_id, trial_ids = make_job(own_farm.database_url, valid_configs(6, offset=40), parallelism=2)
        for trial_id in trial_ids:
            send_evaluate(own_farm, trial_id)
        wait_for(lambda: all_finished(own_farm, job_id), 120, "all trials")
        rows = trial_rows(own_farm.database_url, job_id)
        assert [r.state for r in rows] == ["complete"] * 6, [r.failure_message for r in rows]
        assert all(r.attempt == 1 for r in rows)  # none reaped: each trial took > 2 heartbeats of a 4 s lease
        assert {r.worker_name.split("@")[0] for r in rows} == {ahead.name, behind.name}
        assert all(terminal_transitions(own_farm.database_url, t) == 1 for t in trial_ids)
        assert "reaper:" not in own_farm.log("coordinator")
        # the skew was real: the workers' own log timestamps are hours away from each other
        hours = {w.name: int(re.search(r"\[\d{4}-\d\d-\d\d (\d\d):", own_farm.log(w.name)).group(1))  # type: ignore[union-attr]
                 for w in (ahead, behind)}  # fmt: skip
        assert (hours[ahead.name] - hours[behind.name]) % 24 == 12
    finally:
        own_farm.kill("coordinator")
        own_farm.kill(ahead.name)
        own_farm.kill(behind.name)


def test_supervisor_restarts_a_component_that_died_on_its_own(own_farm: ChaosFarm) -> None:
    """The chaos harness restarts what dies unplanned, as a deployment's restart policy would;
    a component it killed on purpose is not its to restart."""
    coordinator = own_farm.start_coordinator()
    worker = own_farm.start_worker()
    try:
        assert own_farm.supervise() == []
        signal_group(coordinator.pid, signal.SIGKILL)  # behind the harness's back
        wait_for(lambda: not alive(coordinator.pid), 20, "the coordinator to die")
        assert own_farm.supervise() == ["coordinator"]
        assert own_farm.unplanned_restarts[-1] == "coordinator"
        assert alive(own_farm.processes["coordinator"].pid)
        own_farm.kill(worker.name)  # planned: not restarted
        assert own_farm.supervise() == []
    finally:
        own_farm.kill("coordinator")
