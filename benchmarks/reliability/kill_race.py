"""Does a killed worker's Redis connection outlive what ``stack.alive`` calls its death?

    python -m benchmarks.reliability.kill_race [--kills 40] [--busy 2] [--json out.json]

Starts an embedded PostgreSQL and Redis of its own (the chaos harness's farm), then, for each rule of
death, ``--kills`` times: a replay worker blocked in BRPOP on its queue is killed with SIGKILL
(``ChaosFarm.kill``, which waits until the rule says the process is gone), and an item is pushed onto
that queue at once. If the item is gone, Redis handed it to the dying process's connection: a task
message sent then would have been lost with it (until the coordinator's re-send of unclaimed work).

The rules: ``main-thread`` (before: a process is dead once its main thread is a zombie) and
``every-thread`` (now: once every thread is gone or a zombie; a killed process's files, its sockets
among them, close only as its last thread exits). ``--busy`` keeps that many CPU-bound processes
running beside it, as the test suite's load does on a 2-core CI machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import redis

import kernelfarm.testing.chaos_farm as chaos_farm
from kernelfarm.core.gpu import queue_for
from kernelfarm.services import wait_for
from kernelfarm.stack import alive
from kernelfarm.testing.recordings import RTX3090


def main_thread_alive(pid: int) -> bool:
    """The rule before: only the main thread's state was read."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


RULES: dict[str, Callable[[int], bool]] = {"main-thread": main_thread_alive, "every-thread": alive}


@contextlib.contextmanager
def busy_processes(count: int) -> Iterator[None]:
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def ready_worker(farm: chaos_farm.ChaosFarm) -> str:
    name = farm.start_worker(sleep_ms=100).name
    wait_for(lambda: farm.worker_ready(name), 120, f"worker {name} to start")
    return name


def lost_pushes(farm: chaos_farm.ChaosFarm, client: redis.Redis, queue: str, kills: int) -> int:
    lost = 0
    for _ in range(kills):
        name = ready_worker(farm)
        time.sleep(0.3)  # blocked in BRPOP by now
        farm.kill(name, signal.SIGKILL)
        client.lpush(queue, b"probe")
        lost += client.rpop(queue) is None
    return lost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=40)
    parser.add_argument("--busy", type=int, default=2, help="CPU-bound processes running beside it")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="kill-race-"))
    farm = chaos_farm.ChaosFarm(directory)
    queue = queue_for(RTX3090)
    results: dict[str, int] = {}
    try:
        farm.start_servers()
        client = redis.Redis.from_url(farm.redis_url)
        with busy_processes(args.busy):
            for name, rule in RULES.items():
                with mock.patch.object(chaos_farm, "alive", rule):  # what ChaosFarm.kill waits on
                    results[name] = lost_pushes(farm, client, queue, args.kills)
                print(f"{name:>13}: {results[name]} of {args.kills} pushes handed to a dying worker", flush=True)
        client.close()
    finally:
        farm.stop()
        shutil.rmtree(directory, ignore_errors=True)
    if args.json:
        report = {"kills": args.kills, "busy": args.busy, "cpus": os.cpu_count(), "lost": results}
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
