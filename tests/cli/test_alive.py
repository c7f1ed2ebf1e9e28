"""``stack.alive``: what the supervisor, ``down`` and the chaos harness take for a process's death."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from kernelfarm.services import wait_for
from kernelfarm.stack import alive

# The main thread ends (pthread_exit) and the process lives on in another thread, holding its files:
# as the threads of a killed process may still be exiting after the main thread shows as a zombie.
MAIN_THREAD_GONE_FIRST = """
import ctypes, sys, threading, time
from pathlib import Path
def linger():
    time.sleep(float(sys.argv[2]))
    Path(sys.argv[1]).write_text("still here")
threading.Thread(target=linger).start()
ctypes.CDLL(None).pthread_exit(None)
"""


def thread_states(pid: int) -> list[str]:
    return [(Path(f"/proc/{pid}/task") / t / "stat").read_text().split(")")[-1].split()[0]
            for t in (p.name for p in Path(f"/proc/{pid}/task").iterdir())]  # fmt: skip


def test_a_process_whose_main_thread_exited_is_alive_while_another_thread_runs(tmp_path: Path) -> None:
    mark = tmp_path / "mark"
    process = subprocess.Popen([sys.executable, "-c", MAIN_THREAD_GONE_FIRST, str(mark), "2"])
    try:
        wait_for(lambda: "Z" in thread_states(process.pid), 10, "the main thread to exit")
        assert len(thread_states(process.pid)) == 2  # the main thread a zombie, the other one running
        assert alive(process.pid)
        wait_for(lambda: not alive(process.pid), 10, "the last thread to exit")
        assert mark.read_text() == "still here"  # it was dead only once its last thread was done
    finally:
        process.kill()
        process.wait()


def test_an_exited_child_not_yet_reaped_is_not_alive() -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while "Z" not in thread_states(process.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert thread_states(process.pid) == ["Z"]  # a zombie: exited, not waited for
    assert not alive(process.pid)
    process.wait()
    assert not alive(process.pid)
