"""Parking the standby ncu process (worker/cuda/profile.py), on the CPU: real ncu spins a core for as long
as its target runs, so a standby whose target is ready is stopped, and continued when its batch comes.

ncu needs a GPU; here a stand-in executable takes its place behind the same command line: it starts a
target that says ready as the real one does (``DIR/ready`` holding its pid) and polls for ``DIR/job.json``,
and spins, as ncu does, until its target exits."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from kernelfarm.worker.cuda.profile import ProfileTarget, StandbyProfiler

TARGET = """
import os, sys, time
from pathlib import Path
root = Path(sys.argv[1])
time.sleep(0.3)  # the target's start-up
(root / "ready.tmp").write_text(str(os.getpid()))
(root / "ready.tmp").rename(root / "ready")
while not (root / "job.json").is_file():
    time.sleep(0.01)
"""
SPINNING_NCU = """#!{python}
import subprocess, sys
from pathlib import Path
root = Path(sys.argv[sys.argv.index("--wait") + 1])
target = subprocess.Popen([sys.executable, "-c", {target!r}, str(root)])
while target.poll() is None:
    pass  # spins, as ncu's own process does while its target waits
"""


@pytest.fixture
def ncu(tmp_path: Path) -> str:
    path = tmp_path / "ncu"
    path.write_text(SPINNING_NCU.format(python=sys.executable, target=TARGET))
    path.chmod(0o755)
    return str(path)


def wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def test_a_ready_standby_is_stopped_until_its_batch_and_then_runs_it(ncu: str) -> None:
    standby = StandbyProfiler(ncu, {"kf_copy"})
    try:
        process = psutil.Process(standby._proc.pid)
        assert wait_for(lambda: standby.parked), "not parked once ready"
        # SIGSTOP takes effect when the kernel next runs the process: on a loaded machine a spinning
        # process waiting for a core reads "running" for a while after the signal was sent
        assert wait_for(lambda: process.status() == psutil.STATUS_STOPPED, timeout_s=5.0), process.status()
        assert standby.ready()
        (target,) = process.children()
        assert target.status() != psutil.STATUS_STOPPED  # it keeps polling for its batch and its worker
        before = cpu_seconds(process)
        time.sleep(1.0)
        assert cpu_seconds(process) - before < 0.05  # it spun a full core before the fix
        target_spec = ProfileTarget("faultinject", {"n": 1024}, {"MODE": 0}, cubin="", seed=1, entry="kf_copy")
        result = standby.run([target_spec], timeout_s=10.0)
        assert result is not None and not standby.alive()  # continued, its target took the batch, both exited
        assert not standby.parked and not target.is_running()
    finally:
        standby.close()


def test_without_parking_the_standby_keeps_running(ncu: str) -> None:
    standby = StandbyProfiler(ncu, {"kf_copy"}, park=False)
    try:
        process = psutil.Process(standby._proc.pid)
        assert wait_for(standby.ready)
        before = cpu_seconds(process)
        # It spins whenever it gets a core: 0.3 s of CPU, within 10 s (it had 0.28 in 1 s on a 2-core
        # machine that ran three test workers beside it)
        assert wait_for(lambda: cpu_seconds(process) - before > 0.3, timeout_s=10.0)
        assert process.status() != psutil.STATUS_STOPPED
    finally:
        standby.close()


def test_closing_a_parked_standby_kills_ncu_and_its_target(ncu: str) -> None:
    standby = StandbyProfiler(ncu, {"kf_copy"})
    assert wait_for(lambda: standby.parked)
    process = psutil.Process(standby._proc.pid)
    processes = [process, *process.children(recursive=True)]
    standby.close()
    assert wait_for(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in processes))
