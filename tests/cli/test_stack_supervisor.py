"""The foreground stack's supervisor, on real processes: what exits on its own is restarted, a
crash loop is left down, and nothing is restarted while `down` stops the stack."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from kernelfarm.services import wait_for
from kernelfarm.stack import STOPPING_FILE, StackState, Supervisor, alive, signal_group, spawn, stop_processes

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def make_state(tmp_path: Path) -> StackState:
    state = StackState("postgresql://unused", "redis://unused", "http://127.0.0.1:1", "token")
    state.processes = [spawn(name, SLEEPER, {}, tmp_path / "logs") for name in ("coordinator", "api")]
    state.save(tmp_path)
    return state


def kill(pid: int) -> None:
    signal_group(pid, signal.SIGKILL)
    wait_for(lambda: not alive(pid), 10, "the process to die")


def test_a_component_that_dies_is_restarted_and_a_crash_loop_is_left_down(tmp_path: Path) -> None:
    state = make_state(tmp_path)
    supervisor = Supervisor(state, tmp_path, burst=2, window_s=60)
    try:
        assert supervisor.check() == []
        api_pid = state.processes[1].pid
        for _ in range(2):
            old = state.processes[0].pid
            kill(old)
            assert supervisor.check() == ["coordinator"]
            assert state.processes[0].pid != old and alive(state.processes[0].pid)
        assert StackState.load(tmp_path).processes[0].pid == state.processes[0].pid  # type: ignore[union-attr]
        kill(state.processes[0].pid)
        assert supervisor.check() == []  # third exit within the window: left down
        assert supervisor.given_up == {"coordinator"}
        assert state.processes[1].pid == api_pid and alive(api_pid)  # the others untouched
    finally:
        stop_processes(state.processes, grace=5)


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
