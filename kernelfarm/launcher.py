"""Command lines and environments of the farm's three long-running components.

The embedded stack (``kernelfarm up``), the test suite's farms, the benchmarks and the network-namespace
test all start the same processes: the API (``kernelfarm serve-api``), the coordinator (``kernelfarm
coordinator``) and GPU workers (``kernelfarm worker``). They build those command lines here, so an option
added to a component is passed the same way everywhere. The Celery command line that the coordinator and
the workers exec is built here too.

Every command line is ``<python> -P -m kernelfarm ...``: ``-P`` keeps the caller's working directory off
``sys.path``, so a project folder with its own ``core/`` or ``kernels/`` cannot shadow the installed package.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path


def _kernelfarm(python: str, *args: str) -> list[str]:
    return [python, "-P", "-m", "kernelfarm", *args]


def api_argv(port: int, *, host: str = "127.0.0.1", workers: int = 1, python: str = sys.executable) -> list[str]:
    """``kernelfarm serve-api``: the REST API (uvicorn) on ``host:port`` with ``workers`` processes."""
    argv = _kernelfarm(python, "serve-api", "--host", host, "--port", str(port))
    if workers != 1:
        argv += ["--workers", str(workers)]
    return argv


def coordinator_argv(schedule: Path, *, concurrency: int = 2, loglevel: str | None = None,
                     python: str = sys.executable) -> list[str]:  # fmt: skip
    """``kernelfarm coordinator``: ``concurrency`` processes stepping jobs, with its periodic housekeeping
    (Celery beat) keeping its schedule in the file ``schedule``."""
    argv = _kernelfarm(python, "coordinator", "--concurrency", str(concurrency), "--schedule", str(schedule))
    if loglevel:
        argv += ["--loglevel", loglevel]
    return argv


def worker_argv(
    name: str,
    *,
    backend: str = "replay",
    gpu: int | None = None,
    landscapes: Sequence[Path] = (),
    sleep_ms: float = 0.0,
    time_scale: float = 0.0,
    loglevel: str | None = None,
    allow_uploaded_python: bool = False,
    python: str = sys.executable,
) -> list[str]:
    """``kernelfarm worker``: one GPU worker named ``name``.

    Args:
        backend: "cuda", "triton", "replay", "fake" or "auto".
        gpu: cuda: the device index (the worker's default, 0, when None).
        landscapes: replay: recordings of one GPU model (the shipped ones when empty).
        sleep_ms: replay: a fixed time per trial.
        time_scale: replay: also sleep the recorded time times this factor.
        loglevel: Celery's log level (the worker's default when None).
        allow_uploaded_python: also run kernels whose uploaded manifest carries Python (docs/SECURITY.md).
        python: the interpreter that runs it.
    """
    argv = _kernelfarm(python, "worker", "--backend", backend, "--name", name)
    if gpu is not None:
        argv += ["--gpu", str(gpu)]
    for path in landscapes:
        argv += ["--landscape", str(path)]
    if sleep_ms:
        argv += ["--sleep-ms", str(sleep_ms)]
    if time_scale:
        argv += ["--time-scale", str(time_scale)]
    if loglevel:
        argv += ["--loglevel", loglevel]
    if allow_uploaded_python:
        argv += ["--allow-uploaded-python"]
    return argv


def celery_argv(app: str, *args: str, python: str = sys.executable) -> list[str]:
    """Celery's command line for the app module ``app`` (what ``kernelfarm coordinator`` and ``kernelfarm
    worker`` exec), run through :mod:`kernelfarm.celery_main` so the working directory cannot shadow it."""
    return [python, "-P", "-m", "kernelfarm.celery_main", "-A", app, *args]


def component_env(database_url: str, redis_url: str, *, api_url: str | None = None,
                  overrides: Mapping[str, str] | None = None) -> dict[str, str]:  # fmt: skip
    """The environment of a spawned component: the caller's, pointed at the farm's database and broker.

    ``overrides`` (e.g. faster heartbeats and leases for tests) win over everything else.
    """
    env = dict(os.environ)
    env.update({"DATABASE_URL": database_url, "REDIS_URL": redis_url})
    if api_url:
        env["KERNELFARM_API_URL"] = api_url
    # BLAS threads made the coordinator's GP fit 4-9x slower on a 2-core host; one thread per process
    # is also right for the API and the workers, which do no linear algebra of their own.
    env["OMP_NUM_THREADS"] = "1"
    env.update(overrides or {})
    return env
