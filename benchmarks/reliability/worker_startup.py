"""How long a replay worker takes from spawn to serving: what every replacement of a killed worker pays.

    python -m benchmarks.reliability.worker_startup [--starts 8] [--json out.json]

Starts an embedded PostgreSQL and Redis of its own (the chaos harness's farm, default settings), then
starts replay workers one after another exactly as the harness and ``kernelfarm up`` do
(``kernelfarm worker``, from :mod:`kernelfarm.launcher`), each killed with SIGKILL once it serves. Per
start, seconds from the spawn to: the exec of Celery (the ``kernelfarm worker`` command has probed the
backend for its queue), the worker's row written (registered live), and its presence lock taken
(housekeeping can then see it die); and the CPU seconds the process used by then (both interpreters:
the exec keeps the process). The first start pays for a cold page cache and is listed apart.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from sqlalchemy import create_engine, text

from kernelfarm.testing.chaos_farm import ChaosFarm

POLL_S = 0.005


def measure_start(farm: ChaosFarm, engine: Any, host: str) -> dict[str, float]:
    info = farm.start_worker(sleep_ms=100.0)
    name = next(n for n, p in farm.processes.items() if p.pid == info.pid)
    started = time.monotonic()
    process = psutil.Process(info.pid)
    marks: dict[str, float] = {}
    try:
        with engine.connect() as connection:
            while time.monotonic() - started < 120:
                now = time.monotonic() - started
                if "exec_s" not in marks:
                    with contextlib.suppress(psutil.Error):
                        if any("celery_main" in part for part in process.cmdline()):
                            marks["exec_s"] = now
                row = connection.execute(
                    text("SELECT presence_since IS NOT NULL FROM gpu_workers WHERE name = :n"),
                    {"n": f"{name}@{host}"},
                ).first()
                connection.commit()
                if row is not None:
                    marks.setdefault("registered_s", now)
                    if row[0]:
                        marks["presence_s"] = now
                        times = process.cpu_times()
                        marks["cpu_s"] = times.user + times.system
                        break
                time.sleep(POLL_S)
            else:
                raise TimeoutError(f"{name} did not register in 120 s: {farm.log(name)[-2000:]}")
    finally:
        farm.kill(name)
    return {key: round(value, 3) for key, value in marks.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=8, help="worker starts measured (after one to warm up)")
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="kf-startup-"))
    farm = ChaosFarm(directory, fast_clocks=False)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()  # fmt: skip
    try:
        farm.start_servers()
        engine = create_engine(farm.database_url)
        host = socket.gethostname()
        load_before = os.getloadavg()[0]
        first = measure_start(farm, engine, host)
        starts = [measure_start(farm, engine, host) for _ in range(args.starts)]
        engine.dispose()
    finally:
        farm.stop()
        shutil.rmtree(directory, ignore_errors=True)
    keys = ("exec_s", "registered_s", "presence_s", "cpu_s")
    summary = {key: round(statistics.median(s[key] for s in starts), 3) for key in keys}
    report = {"commit": commit, "cpus": os.cpu_count(), "python": platform.python_version(),
              "load_1min_before": round(load_before, 2), "load_1min_after": round(os.getloadavg()[0], 2),
              "median": summary, "first_start": first, "starts": starts}  # fmt: skip
    print(json.dumps({k: report[k] for k in ("commit", "load_1min_before", "load_1min_after", "median")}, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(SystemExit(143)))
    main()
