"""Duplicate delivery and skewed worker clocks, on real processes: each trial is claimed once,
written once, and never reaped while its worker is alive."""

from __future__ import annotations

import re

from benchmarks.reliability.farm import ChaosFarm, wait_for
from tests.reliability.conftest import make_job, send_evaluate, terminal_transitions, trial_rows, valid_configs

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


def all_finished(farm: ChaosFarm, job_id) -> bool:  # type: ignore[no-untyped-def]
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
    (and another 6 h behind) is neither reaped nor allowed to outlive its lease. libfaketime moves
    the whole process's wall clock (Python, libpq, kombu), not only time.time()."""
    skew = {"LD_PRELOAD": LIBFAKETIME, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    ahead = own_farm.start_worker(sleep_ms=2500, FAKETIME="+6h", **skew)
    behind = own_farm.start_worker(sleep_ms=2500, FAKETIME="-6h", **skew)
    own_farm.start_coordinator()  # the reaper (lease 4 s): it must not take these trials away
    try:
        job_id, trial_ids = make_job(own_farm.database_url, valid_configs(6, offset=40), parallelism=2)
        for trial_id in trial_ids:
            send_evaluate(own_farm, trial_id)
        wait_for(lambda: all_finished(own_farm, job_id), 120, "all trials")
        rows = trial_rows(own_farm.database_url, job_id)
        assert [r.state for r in rows] == ["complete"] * 6
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
