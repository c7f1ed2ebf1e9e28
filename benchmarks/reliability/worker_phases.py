"""Where a replay worker's Celery process spends its start-up, phase by phase.

    python -m benchmarks.reliability.worker_phases [--starts 3] [--json out.json]

``kernelfarm worker`` probes its backend for the queue, then execs Celery (``kernelfarm.celery_main``);
this script times that second process, which does the rest: it runs the same Celery command line, on
servers of its own, in a child that notes the time (seconds since its interpreter started) after each
phase: the worker's task module imported (the farm's code, Celery, SQLAlchemy...), Celery's command
line imported, Celery's start-up (``worker_init``, the consumer's set-up), then in the ``worker_ready``
handler that registers the worker: the backend built, the kernel catalogue loaded, the row written and
the presence lock taken. ``benchmarks/reliability/worker_startup.py`` measures the whole start.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelfarm.testing.chaos_farm import ChaosFarm

MARKS = "PHASE-MARKS "


def child() -> None:
    """Celery's worker, as ``kernelfarm worker`` execs it, with time marks (argv: Celery's, after -A)."""
    started = time.perf_counter()
    marks: list[tuple[str, float]] = []

    def mark(what: str) -> None:
        marks.append((what, round(time.perf_counter() - started, 3)))

    import importlib

    from kernelfarm import celery_main

    at = sys.argv.index("-A")
    if sys.argv[at + 2] in getattr(celery_main, "COMPONENT_COMMANDS", ()):
        celery_main._without_repl()  # type: ignore[attr-defined]  # as celery_main.main() does
    tasks = importlib.import_module(sys.argv[at + 1])
    mark("task module imported")
    import celery.bin.celery  # noqa: F401 - what celery_main's Celery entry point imports next

    mark("Celery's command line imported")
    from celery.signals import worker_init, worker_ready

    worker_init.connect(lambda **_: mark("worker_init"), weak=False)

    def timed(owner: Any, attribute: str, label: str) -> None:
        function = getattr(owner, attribute)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = function(*args, **kwargs)
            mark(label)
            return result

        setattr(owner, attribute, wrapper)

    timed(tasks, "_backend", "backend built")
    timed(tasks, "all_kernels", "kernel catalogue loaded")
    timed(tasks.worker_store, "register_worker", "row written")
    timed(tasks.Presence, "start", "presence lock taken")

    def report(**_: Any) -> None:
        print(MARKS + json.dumps(marks), file=sys.__stdout__, flush=True)

    worker_ready.connect(report, weak=False)  # after the farm's own handler, connected at import
    from celery.__main__ import main

    sys.argv = ["celery", *sys.argv[at:]]
    main()


def measure(farm: ChaosFarm, repository: Path) -> list[tuple[str, float]]:
    from kernelfarm import launcher
    from kernelfarm.testing.recordings import CONVOLUTION

    env = farm.env()
    env.update({"KERNELFARM_WORKER_BACKEND": "replay", "KERNELFARM_WORKER_GPU": "0",
                "KERNELFARM_WORKER_LANDSCAPES": str(CONVOLUTION), "KERNELFARM_WORKER_SLEEP_MS": "100",
                "KERNELFARM_WORKER_TIME_SCALE": "0", "KERNELFARM_WORKER_ALLOW_UPLOADED_PYTHON": "0"})  # fmt: skip
    argv = launcher.celery_argv("kernelfarm.worker.tasks", "worker", "-Q", "gpu.nvidia-geforce-rtx-3090", "--pool",
                                "solo", "--concurrency", "1", "-n", f"phases-{uuid.uuid4().hex[:8]}@%h",
                                "--without-gossip", "--without-mingle", "--without-heartbeat")  # fmt: skip
    # The child is this module (run from ``repository``: its kernelfarm is the one measured).
    command = [sys.executable, "-m", "benchmarks.reliability.worker_phases", "--child", *argv[argv.index("-A") :]]
    process = subprocess.Popen(command, env=env, cwd=repository, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)  # fmt: skip
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if MARKS in line:
                return [tuple(m) for m in json.loads(line[line.index(MARKS) + len(MARKS) :])]  # type: ignore[misc]
        raise RuntimeError("the worker exited before it was ready")
    finally:
        process.kill()
        process.wait(30)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        del sys.argv[1]
        child()
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    # Imported here: the child (this module too) marks its time from a bare interpreter.
    from kernelfarm.testing.chaos_farm import ChaosFarm

    repository = Path(__file__).resolve().parents[2]
    directory = Path(tempfile.mkdtemp(prefix="kf-phases-"))
    farm = ChaosFarm(directory, fast_clocks=False)
    try:
        farm.start_servers()
        load_before = os.getloadavg()[0]
        runs = [measure(farm, repository) for _ in range(args.starts + 1)][1:]  # the first warms the page cache
    finally:
        farm.stop()
        shutil.rmtree(directory, ignore_errors=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=repository).stdout.strip()  # fmt: skip
    report = {"commit": commit, "cpus": os.cpu_count(), "load_1min_before": round(load_before, 2), "runs": runs}
    for run in runs:
        print("  ".join(f"{what} {at:.3f}" for what, at in run))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
