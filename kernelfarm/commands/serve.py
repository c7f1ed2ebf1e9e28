"""Long-running components: ``serve-api``, ``coordinator`` and ``worker`` (one process per GPU)."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from kernelfarm.core.gpu import model_slug, queue_for
from kernelfarm.launcher import celery_argv

# ``kernelfarm worker`` runs again for every replacement of a dead worker and only finds its queue
# before it execs Celery, so this module imports little: the settings (pydantic), the landscapes
# (numpy) and the backends are imported where they are used.


def serve_api(host: str = "127.0.0.1", port: int = 8765, workers: int = 1) -> None:
    """Run the REST API (uvicorn). /health is liveness, /ready checks database and broker."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    options: dict[str, Any] = {"factory": True, "host": host, "port": port, "workers": workers, "log_level": "info"}
    if workers <= 1:  # asyncio binds the socket itself, as TCP
        uvicorn.run("kernelfarm.api.app:create_app", **options)
        return
    # What uvicorn.run does for workers > 1, but with a listening socket that says it is TCP.
    config = uvicorn.Config("kernelfarm.api.app:create_app", **options)
    with shared_metrics_dir():
        Multiprocess(config, sockets=[tcp_listener(config.bind_socket())]).run()


@contextmanager
def shared_metrics_dir() -> Iterator[None]:
    """Several API processes answer /metrics from one set of figures: prometheus-client's multiprocess
    mode, in PROMETHEUS_MULTIPROC_DIR. When the operator set none, a fresh one for this server's
    lifetime (its workers inherit the variable; removed when they have stopped)."""
    from kernelfarm.core.settings import get_settings

    if get_settings().prometheus_multiproc_dir is not None:
        yield
        return
    directory = tempfile.mkdtemp(prefix="kernelfarm-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    try:
        yield
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def tcp_listener(bound: socket.socket) -> socket.socket:
    """The same listening socket, marked IPPROTO_TCP.

    uvicorn binds the socket it hands to its worker processes with proto 0; accepted connections
    inherit it, and asyncio only turns Nagle off (TCP_NODELAY) on sockets whose proto is
    IPPROTO_TCP. With Nagle on, a response's body (written after its headers) waited for the
    client's delayed ACK: every request after the first on a keep-alive connection took ~44 ms
    instead of ~1 ms with --workers 2 (Kludex/uvicorn#3149, open in uvicorn 0.54)."""
    if bound.family not in (socket.AF_INET, socket.AF_INET6):
        return bound
    listener = socket.socket(bound.family, bound.type, socket.IPPROTO_TCP, fileno=bound.detach())
    listener.set_inheritable(True)
    return listener


def coordinator(
    concurrency: int = typer.Option(2, help="coordinator processes (jobs step in parallel)"),
    schedule: Path = typer.Option(Path(".kernelfarm/celerybeat-schedule"), help="beat schedule file"),
    loglevel: str = "INFO",
) -> None:
    """Run the coordinator: a Celery worker on queue "tuner" and its periodic housekeeping (Celery beat),
    as one component: if either exits, or this process dies, both stop (kernelfarm/process_group.py)."""
    from kernelfarm.core.settings import Settings
    from kernelfarm.core.standby import beside_gate
    from kernelfarm.process_group import run_together

    schedule = beside_gate(Settings(), "celerybeat-schedule") or schedule  # a spare's scheduler keeps its own
    schedule.parent.mkdir(parents=True, exist_ok=True)
    app = "kernelfarm.tuner.tasks"
    worker_argv = celery_argv(app, "worker", "-Q", "tuner", "--pool", "prefork", "--concurrency",
                              str(concurrency), "-n", "tuner@%h", "--loglevel", loglevel, "--without-gossip",
                              "--without-mingle")  # fmt: skip
    beat_argv = celery_argv(app, "beat", "-s", str(schedule), "--loglevel", loglevel)
    raise typer.Exit(run_together({"coordinator worker": worker_argv, "scheduler (beat)": beat_argv}))


def default_landscapes() -> list[Path]:
    """The shipped recordings of the most-recorded GPU model (one replay worker = one GPU model)."""
    from kernelfarm.core.recording_file import read_json_tolerant, recorded_device
    from kernelfarm.kernels.recorded import RECORDED_DIR

    device_of = {p: recorded_device(read_json_tolerant(p)) for p in sorted(RECORDED_DIR.glob("*.json*"))}
    devices = Counter(device_of.values())
    if not devices:
        raise typer.BadParameter(f"no recorded landscapes in {RECORDED_DIR}")
    device = devices.most_common(1)[0][0]
    return [p for p, recorded in device_of.items() if recorded == device]


def worker(
    backend: str = typer.Option(
        "auto",
        help="cuda, triton, replay, fake (CPU stand-in), or auto (cuda when a GPU and CuPy are present, else replay)",
    ),
    gpu: int = typer.Option(0, help="cuda: device index"),
    landscape: list[Path] = typer.Option([], help="replay: Kernel Tuner cache file(s) of ONE GPU model"),
    name: str = typer.Option("", help="worker name (default: backend + gpu index)"),
    sleep_ms: float = typer.Option(0.0, help="replay: fixed time per trial, ms"),
    time_scale: float = typer.Option(0.0, help="replay: also sleep recorded time x this factor"),
    allow_uploaded_python: bool = typer.Option(
        False, help="also run kernels whose uploaded manifest carries Python (host code; docs/SECURITY.md)"
    ),
    loglevel: str = "INFO",
) -> None:
    """Run one GPU worker. Its queue is gpu.<model-slug>, derived from the device's real name
    (or, for replay, from the recorded device)."""
    from kernelfarm.worker.backend_factory import BACKEND_NAMES

    chosen = gpu_backend_available() if backend == "auto" else backend
    if chosen not in BACKEND_NAMES:
        raise typer.BadParameter(f"backend must be one of {', '.join(BACKEND_NAMES)} or auto")
    paths = [p.resolve() for p in landscape] or default_landscapes()
    missing = [str(p) for p in paths if not p.is_file()]
    if chosen == "replay" and missing:
        raise typer.BadParameter(f"landscape file(s) not found: {missing}")
    os.environ.update({
        "KERNELFARM_WORKER_BACKEND": chosen,
        "KERNELFARM_WORKER_GPU": str(gpu),
        "KERNELFARM_WORKER_LANDSCAPES": os.pathsep.join(str(p) for p in paths),
        "KERNELFARM_WORKER_SLEEP_MS": str(sleep_ms),
        "KERNELFARM_WORKER_TIME_SCALE": str(time_scale),
        "KERNELFARM_WORKER_ALLOW_UPLOADED_PYTHON": "1" if allow_uploaded_python else "0",
    })  # fmt: skip
    gpu_name, gpu_model = probe_gpu(chosen, paths)
    queue = queue_for(gpu_model)
    node = f"{name or chosen + str(gpu)}@%h"
    typer.echo(f"worker {node}: {gpu_name} ({chosen}) on queue {queue}")
    # exec, not fork: the measuring process starts clean (no CUDA context inherited).
    argv = celery_argv("kernelfarm.worker.tasks", "worker", "-Q", queue, "--pool", "solo", "--concurrency", "1",
                       "-n", node, "--loglevel", loglevel, "--without-gossip", "--without-mingle",
                       "--without-heartbeat")  # fmt: skip
    os.execv(sys.executable, argv)


def probe_gpu(backend: str, landscapes: list[Path]) -> tuple[str, str]:
    """The GPU name and model of the worker's backend, as it will register (the queue comes from the
    model), from the environment ``worker`` has set. A replay worker's GPU is the one its recordings
    name, read from the files alone: the Celery process builds the backend (the landscapes) anyway,
    and building it here too cost a replacement worker ~0.2 s before its exec (settings, numpy, every
    entry of its recordings). The other backends are built and closed to ask them.

    Raises:
        InvalidInput: a replay recording is not a Kernel Tuner cache file.
        ValueError: replay recordings of several GPUs.
    """
    if backend == "replay":
        from kernelfarm.core.recording_file import recorded_gpu

        name = recorded_gpu(landscapes)
        return name, model_slug(name)
    from kernelfarm.core.settings import get_settings
    from kernelfarm.worker.backend_factory import make_backend

    get_settings.cache_clear()
    probe = make_backend(get_settings())
    identity = probe.identity()
    probe.close()
    return identity.gpu_name, identity.gpu_model


def gpu_backend_available() -> str:
    try:
        import cupy

        return "cuda" if cupy.cuda.runtime.getDeviceCount() > 0 else "replay"
    except Exception:
        return "replay"
