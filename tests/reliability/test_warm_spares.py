"""Warm spares (core/standby.py): a spare worker or coordinator, started ahead, stays out of the
farm until its gate opens (consumes nothing, registers nothing, sends nothing), serves once it opens,
and exits when the supervisor that would have opened it dies. Real processes on the suite's own servers."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from sqlalchemy import create_engine, text

from kernelfarm import launcher
from kernelfarm.core.standby import open_gate, spare_env, standing_by
from kernelfarm.services import wait_for
from kernelfarm.stack import alive, spawn
from kernelfarm.testing.chaos_farm import ChaosFarm
from tests.reliability.conftest import (
    QUEUE,
    STARTUP_TIMEOUT,
    make_job,
    send_evaluate,
    started_farm,
    trial_rows,
    valid_configs,
)


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosFarm]:
    with started_farm(Path(tmp_path_factory.mktemp("warm-spares")), worker_spares=1, coordinator_spares=1) as farm:
        yield farm


def registered(database_url: str, name: str) -> bool:
    engine = create_engine(database_url)
    with engine.connect() as connection:
        found = connection.execute(
            text("SELECT count(*) FROM gpu_workers WHERE split_part(name, '@', 1) = :n"), {"n": name}
        ).scalar_one()
    engine.dispose()
    return bool(found)


def test_a_spare_worker_takes_nothing_until_promoted_then_serves(farm: ChaosFarm) -> None:
    first = farm.start_worker(sleep_ms=50)  # leaves one spare standing by beside it
    ((spare_name, spare, gate),) = [s for kind in farm.spare_workers.values() for s in kind]
    wait_for(lambda: standing_by(gate) >= 1, STARTUP_TIMEOUT, "the spare to reach its gate")
    wait_for(lambda: registered(farm.database_url, first.name), STARTUP_TIMEOUT, "the first worker")
    farm.kill(first.name)
    job_id, (trial_id,) = make_job(farm.database_url, valid_configs(1))
    send_evaluate(farm, trial_id)
    time.sleep(2.0)  # the spare's start-up is done: a spare that consumed would have taken it by now
    broker = redis.Redis.from_url(farm.redis_url)
    assert broker.llen(QUEUE) == 1, "the spare took a message before its gate opened"
    assert not registered(farm.database_url, spare_name)
    assert trial_rows(farm.database_url, job_id)[0].state == "queued"

    promoted = farm.start_worker(sleep_ms=50)  # a restart: promotes the spare, starts the next one
    assert promoted.pid == spare.pid and farm.processes[spare_name] is spare
    wait_for(lambda: trial_rows(farm.database_url, job_id)[0].state == "complete", 60, "the promoted spare")
    assert registered(farm.database_url, spare_name)
    assert trial_rows(farm.database_url, job_id)[0].worker_name.startswith(f"{spare_name}@")
    broker.close()
    farm.kill(spare_name)


def test_a_spare_coordinator_neither_consumes_nor_schedules_until_promoted(farm: ChaosFarm) -> None:
    farm.start_coordinator()
    ((spare, gate),) = farm.spare_coordinators
    wait_for(lambda: standing_by(gate) >= 2, STARTUP_TIMEOUT, "the spare's worker and scheduler at the gate")
    wait_for(farm.coordinator_ready, STARTUP_TIMEOUT, "the first coordinator")
    time.sleep(1.5)  # a scheduler that ticked would have sent housekeeping by now (every second here)
    log = Path(spare.log).read_text(errors="replace")
    assert " ready." not in log and "Sending due task" not in log
    farm.kill("coordinator")
    farm.start_coordinator()
    assert farm.processes["coordinator"] is spare
    wait_for(farm.coordinator_ready, 60, "the promoted coordinator to consume")
    wait_for(lambda: "Sending due task housekeeping" in Path(spare.log).read_text(errors="replace"), 30,
             "the promoted scheduler to tick")  # fmt: skip
    farm.kill("coordinator")


def test_a_spare_exits_when_its_supervisor_dies(farm: ChaosFarm, tmp_path: Path) -> None:
    supervisor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    gate = tmp_path / "gates" / "orphan"
    env = farm.env(**spare_env(gate, supervisor.pid))
    spare = spawn("orphan", launcher.worker_argv("orphan", sleep_ms=50), env, tmp_path / "logs")
    try:
        wait_for(lambda: standing_by(gate) >= 1, STARTUP_TIMEOUT, "the spare to reach its gate")
        supervisor.kill()
        supervisor.wait()
        wait_for(lambda: not alive(spare.pid), 30, "the spare to exit")
        assert not registered(farm.database_url, "orphan")
    finally:
        supervisor.kill()
        supervisor.wait()
        if alive(spare.pid):
            farm.processes["orphan"] = spare
            farm.kill("orphan")


def test_a_gate_opened_before_the_spare_arrives_lets_it_straight_through(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    open_gate(gate)
    env = {**spare_env(gate), "PATH": "/usr/bin:/bin"}
    waits = "from kernelfarm.core.settings import Settings; from kernelfarm.core.standby import wait_at_gate; "
    done = subprocess.run([sys.executable, "-c", waits + "wait_at_gate(Settings())"], env=env, timeout=60, check=True)
    assert done.returncode == 0


def test_the_harness_keeps_more_spares_while_promotions_find_them_starting(tmp_path: Path) -> None:
    """A worker replaced at once, before its spare reached its gate: that kind of worker keeps a
    second spare (as `kernelfarm up` does, core/standby.py's SpareDemand), and trim_spares stops it
    again once the window has passed."""
    with started_farm(tmp_path, worker_spares=1, coordinator_spares=0, spare_window_s=4.0) as farm:
        farm.start_worker(50.0, name="w-keeps")
        [kind] = farm.spare_workers
        wait_for(farm.spares_standing_by, STARTUP_TIMEOUT, "the first spare")
        farm.start_worker(50.0)  # promotes the spare at its gate: one spare is enough
        assert farm.promotions[-1] is True and len(farm.spare_workers[kind]) == 1
        farm.start_worker(50.0)  # promotes the spare started a moment ago: still starting
        assert farm.promotions[-1] is False
        spares = farm.spare_workers[kind]
        assert len(spares) == 2 and all(alive(info.pid) for _, info, _ in spares)
        newest = spares[-1][1]
        farm.trim_spares()
        assert len(farm.spare_workers[kind]) == 2  # within the window: both kept
        time.sleep(4.0)
        farm.trim_spares()
        assert len(farm.spare_workers[kind]) == 1
        wait_for(lambda: not alive(newest.pid), 10, "the surplus spare to stop")
