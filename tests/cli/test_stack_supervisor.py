"""The foreground stack's supervisor, on real processes: what exits on its own is restarted with
backoff, a crash loop is loud (components.json, `kernelfarm status`, the API's /ready) but not left
down, giving up (when asked for) is as loud, and nothing is restarted while `down` stops the stack."""

from __future__ import annotations

import json
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kernelfarm.api.app import create_app
from kernelfarm.cli import app
from kernelfarm.core.settings import Settings
from kernelfarm.core.standby import standing_by
from kernelfarm.services import wait_for
from kernelfarm.stack import (
    HEALTH_FILE,
    STACK_TAG,
    STOPPING_FILE,
    StackState,
    Supervisor,
    alive,
    read_health,
    signal_group,
    spawn,
    stop_processes,
)

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def make_state(tmp_path: Path, api_port: int = 1) -> StackState:
    state = StackState("postgresql://unused", "redis://unused", f"http://127.0.0.1:{api_port}", "token")
    # Tagged like a real stack's components: status and down count only processes carrying the tag.
    env = {STACK_TAG: str(tmp_path.resolve())}
    state.processes = [spawn(name, SLEEPER, env, tmp_path / "logs") for name in ("coordinator", "api")]
    state.save(tmp_path)
    return state


def kill(pid: int) -> None:
    signal_group(pid, signal.SIGKILL)
    wait_for(lambda: not alive(pid), 10, "the process to die")


def test_a_component_is_restarted_with_backoff_and_a_crash_loop_is_loud_but_not_left_down(tmp_path: Path) -> None:
    """Like a deployment: at once, then after a doubling delay; after ``burst`` exits it is
    crash-looping (components.json says so) and still restarted (it was left down for good)."""
    state = make_state(tmp_path)
    supervisor = Supervisor(state, tmp_path, burst=3, window_s=60, backoff_start_s=0.5, backoff_max_s=2)
    try:
        assert supervisor.check() == []
        api_pid = state.processes[1].pid
        kill(state.processes[0].pid)
        assert supervisor.check() == ["coordinator"]  # the first exit: restarted at once
        for delay in (0.5, 1.0):
            old = state.processes[0].pid
            kill(old)
            started = time.monotonic()
            assert supervisor.check() == []  # waiting out its backoff
            assert read_health(tmp_path)["coordinator"].state in ("restarting", "crash-looping")
            restarted = wait_for(lambda: supervisor.check(), 10, "the restart after the backoff")
            assert restarted == ["coordinator"] and time.monotonic() - started >= delay * 0.9
            assert state.processes[0].pid != old and alive(state.processes[0].pid)
        assert StackState.load(tmp_path).processes[0].pid == state.processes[0].pid  # type: ignore[union-attr]
        health = read_health(tmp_path)
        assert health["coordinator"].state == "crash-looping" and health["coordinator"].exits == 3
        assert health["api"].state == "running"
        assert state.processes[1].pid == api_pid and alive(api_pid)  # the others untouched
        assert supervisor.given_up == set()
    finally:
        stop_processes(state.processes, grace=5)


def test_giving_up_is_visible_in_status_and_ready(tmp_path: Path, database_url: str, redis_url: str) -> None:
    with socket.socket() as listener:  # stands in for the stack's API port (status checks it answers)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        state = make_state(tmp_path, api_port=listener.getsockname()[1])
        supervisor = Supervisor(state, tmp_path, give_up_after=1)
        try:
            kill(state.processes[0].pid)
            assert supervisor.check() == []
            assert supervisor.given_up == {"coordinator"} and not alive(state.processes[0].pid)
            assert read_health(tmp_path)["coordinator"].state == "gave up"
            status = CliRunner().invoke(app, ["status", "--state-dir", str(tmp_path)])
            assert status.exit_code == 1 and "coordinator" in status.output and "GAVE UP" in status.output, (
                status.output
            )
        finally:
            stop_processes(state.processes, grace=5)
    api = create_app(Settings(database_url=database_url, redis_url=redis_url, stack_health_file=tmp_path / HEALTH_FILE))
    ready = TestClient(api).get("/ready")
    assert ready.status_code == 503
    assert ready.json()["components"] == "failing: coordinator gave up (1 exits)"
    (tmp_path / HEALTH_FILE).write_text(json.dumps({"api": {"state": "running", "exits": 0, "log": "x"}}))
    assert TestClient(api).get("/ready").status_code == 200


def test_nothing_is_restarted_while_the_stack_is_being_stopped(tmp_path: Path) -> None:
    state = make_state(tmp_path)
    supervisor = Supervisor(state, tmp_path)
    try:
        (tmp_path / STOPPING_FILE).touch()
        kill(state.processes[0].pid)
        assert supervisor.check() == []
        assert not alive(state.processes[0].pid)
    finally:
        stop_processes(state.processes, grace=5)


def test_a_warm_spare_is_promoted_in_place_of_a_component_that_dies(tmp_path: Path) -> None:
    """With spares, the coordinator's replacement is its spare, already started and held at its gate
    (core/standby.py); a new spare takes its place; the API has none; stop_spares ends them."""
    served = tmp_path / "served"
    served.mkdir()
    # stands in for a component: it waits at the gate when it is a spare, then says it serves
    component = [sys.executable, "-c", "import os, sys, time; from kernelfarm.core.settings import Settings; "
                 "from kernelfarm.core.standby import wait_at_gate; wait_at_gate(Settings()); "
                 "open(os.path.join(sys.argv[1], str(os.getpid())), 'w').close(); time.sleep(120)",
                 str(served)]  # fmt: skip
    state = StackState("postgresql://unused", "redis://unused", "http://127.0.0.1:1", "token")
    state.processes = [spawn("coordinator", component, {}, tmp_path / "logs"),
                       spawn("api", SLEEPER, {}, tmp_path / "logs")]  # fmt: skip
    supervisor = Supervisor(state, tmp_path, spares=True)
    try:
        assert set(supervisor.spares) == {"coordinator"}
        [(spare, gate)] = supervisor.spares["coordinator"]
        first = state.processes[0].pid
        wait_for(lambda: standing_by(gate) == 1 and (served / str(first)).exists(), 60, "the spare at its gate")
        time.sleep(0.3)
        assert not (served / str(spare.pid)).exists()  # held: it does not serve
        kill(first)
        assert supervisor.check() == ["coordinator"]
        assert state.processes[0].pid == spare.pid
        wait_for(lambda: (served / str(spare.pid)).exists(), 10, "the promoted spare to serve")
        [(following, _)] = supervisor.spares["coordinator"]
        assert following.pid != spare.pid and alive(following.pid)
        supervisor.stop_spares()
        wait_for(lambda: not alive(following.pid), 10, "the spare to stop")
        assert not (served / str(following.pid)).exists()
    finally:
        supervisor.stop_spares()
        stop_processes(state.processes, grace=5)


def test_the_supervisor_wakes_the_moment_a_component_dies(tmp_path: Path) -> None:
    """`kernelfarm up` waits in Supervisor.wait between checks: it sleeps the whole timeout while
    everything runs, and returns within milliseconds of a death (it polled every 0.5 s before, and a
    killed coordinator's replacement waited for the next look), so the restart follows at once."""
    state = make_state(tmp_path)
    supervisor = Supervisor(state, tmp_path)
    try:
        started = time.monotonic()
        supervisor.wait(0.4)
        assert time.monotonic() - started >= 0.39  # nothing died: the whole timeout
        victim = state.processes[0].pid
        killer = threading.Timer(0.5, signal_group, (victim, signal.SIGKILL))
        killer.start()
        started = time.monotonic()
        supervisor.wait(10.0)
        woke = time.monotonic() - started
        killer.join()
        assert 0.45 <= woke < 1.0, woke  # the death, not the timeout, ended the wait
        wait_for(lambda: not alive(victim), 10, "the process to die")
        assert supervisor.check() == ["coordinator"]
        started = time.monotonic()
        supervisor.wait(0.3)  # the replacement is watched in its turn
        assert time.monotonic() - started >= 0.29
    finally:
        supervisor.close()
        stop_processes(state.processes, grace=5)


def test_a_component_whose_spare_was_still_starting_keeps_a_second_one_for_a_while(tmp_path: Path) -> None:
    """Deaths faster than a spare starts: the promoted spare had not reached its gate, so the
    component keeps two spares (core/standby.py's SpareDemand); once a window passes without that,
    the newest is stopped and one is left."""
    # stands in for a component that takes 1.5 s to reach its gate
    component = [sys.executable, "-c", "import time; time.sleep(1.5); "
                 "from kernelfarm.core.settings import Settings; from kernelfarm.core.standby import wait_at_gate; "
                 "wait_at_gate(Settings()); time.sleep(120)"]  # fmt: skip
    state = StackState("postgresql://unused", "redis://unused", "http://127.0.0.1:1", "token")
    state.processes = [spawn("coordinator", component, {}, tmp_path / "logs")]
    supervisor = Supervisor(state, tmp_path, spares=True, spare_window_s=3.0)
    try:
        [(starting, _)] = supervisor.spares["coordinator"]
        kill(state.processes[0].pid)
        assert supervisor.check() == ["coordinator"]  # promoted before it reached its gate
        assert state.processes[0].pid == starting.pid
        spares = supervisor.spares["coordinator"]
        assert len(spares) == 2 and all(alive(spare.pid) for spare, _ in spares)
        older, newer = spares[0][0], spares[1][0]
        wait_for(lambda: supervisor.check() == [] and len(supervisor.spares["coordinator"]) == 1, 10, "the trim")
        assert supervisor.spares["coordinator"][0][0].pid == older.pid
        wait_for(lambda: not alive(newer.pid), 10, "the surplus spare to stop")
    finally:
        supervisor.close()
        stop_processes(state.processes, grace=5)


def test_the_supervisor_sleeps_through_a_backoff_until_the_restart_is_due(tmp_path: Path) -> None:
    """A component that died again soon after its restart waits out a backoff: Supervisor.wait
    neither spins on its dead process nor oversleeps the moment its restart is due."""
    state = make_state(tmp_path)
    supervisor = Supervisor(state, tmp_path, backoff_start_s=0.6, backoff_max_s=2)
    try:
        kill(state.processes[0].pid)
        assert supervisor.check() == ["coordinator"]  # the first exit: restarted at once
        kill(state.processes[0].pid)  # and again: the next restart waits 0.6 s
        assert supervisor.check() == []
        started = time.monotonic()
        supervisor.wait(10.0)
        assert 0.5 <= time.monotonic() - started < 1.5
        assert supervisor.check() == ["coordinator"]
    finally:
        supervisor.close()
        stop_processes(state.processes, grace=5)
