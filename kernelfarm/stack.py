"""The embedded default stack: servers + migrations + API + coordinator + N workers, on one host.

``kernelfarm up`` starts it (``--detach`` returns once everything answers), ``kernelfarm down``
stops it. Its state (URLs, pids, a local admin token) lives in ``<state_dir>/stack.json``, readable
only by the user who started it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from kernelfarm import launcher
from kernelfarm.core.db import session_scope
from kernelfarm.core.migrate import upgrade
from kernelfarm.core.settings import Settings
from kernelfarm.core.store.tokens import create_token
from kernelfarm.core.store.workers import live_workers
from kernelfarm.services import EmbeddedPostgres, EmbeddedRedis, free_port, port_open

logger = logging.getLogger(__name__)
STATE_FILE = "stack.json"
# Written by `down` before it stops anything: a supervising `up` must not restart what `down` stops.
STOPPING_FILE = "stopping"


@dataclass
class ProcessInfo:
    name: str
    pid: int
    log: str
    argv: list[str] = field(default_factory=list)  # how to start it again


@dataclass
class StackState:
    database_url: str
    redis_url: str
    api_url: str
    token: str
    embedded_postgres: str | None = None  # data dir when we started it
    embedded_redis_pid: int | None = None
    processes: list[ProcessInfo] = field(default_factory=list)

    def save(self, state_dir: Path) -> None:
        path = state_dir / STATE_FILE
        path.write_text(json.dumps(asdict(self), indent=2))
        path.chmod(0o600)  # holds an admin token

    @classmethod
    def load(cls, state_dir: Path) -> StackState | None:
        path = state_dir / STATE_FILE
        if not path.is_file():
            return None
        data = json.loads(path.read_text())
        data["processes"] = [ProcessInfo(**p) for p in data.get("processes", [])]
        return cls(**data)


@dataclass(frozen=True)
class WorkerPlan:
    backend: str  # "cuda", "triton" or "replay"
    count: int
    landscapes: tuple[Path, ...] = ()
    sleep_ms: float = 0.0
    time_scale: float = 0.0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (our own exited child) is not alive
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def spawn(name: str, argv: list[str], env: dict[str, str], log_dir: Path, cwd: Path | None = None) -> ProcessInfo:
    """Start ``argv`` in its own session, its output appended to ``<log_dir>/<name>.log``; ``cwd`` is
    its working directory (the caller's when None)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    with open(log_path, "ab") as log:
        # A new session: `down` stops the whole process group, Celery's children included.
        process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # fmt: skip
    return ProcessInfo(name=name, pid=process.pid, log=str(log_path), argv=list(argv))


def _worker_argv(index: int, plan: WorkerPlan) -> list[str]:
    """The command line of the plan's worker number ``index`` (cuda, triton: on GPU ``index``)."""
    return launcher.worker_argv(f"{plan.backend}{index}", backend=plan.backend,
                                gpu=index if plan.backend in ("cuda", "triton") else None, landscapes=plan.landscapes,
                                sleep_ms=plan.sleep_ms, time_scale=plan.time_scale)  # fmt: skip


def _component_env(state: StackState) -> dict[str, str]:
    return launcher.component_env(state.database_url, state.redis_url, api_url=state.api_url)


def start_stack(settings: Settings, state_dir: Path, plan: WorkerPlan, api_port: int | None = None,
                timeout: float = 120.0) -> StackState:  # fmt: skip
    state_dir = state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    existing = StackState.load(state_dir)
    if existing and any(alive(p.pid) for p in existing.processes):
        raise RuntimeError(f"a stack is already running from {state_dir}; run `kernelfarm down` first")
    (state_dir / STOPPING_FILE).unlink(missing_ok=True)

    embedded_pg = embedded_redis_pid = None
    database_url = settings.database_url
    if not database_url:
        postgres = EmbeddedPostgres(state_dir / "postgres")
        postgres.start()
        database_url, embedded_pg = postgres.url, str(postgres.data_dir)
    redis_url = settings.redis_url
    if not redis_url:
        redis = EmbeddedRedis(state_dir / "redis")
        redis.start()
        redis_url, embedded_redis_pid = redis.url, redis.pid

    upgrade(database_url)
    with session_scope(database_url) as session:
        token = create_token(session, "local-stack-admin", ["admin"])
    port = api_port or free_port()
    state = StackState(database_url, redis_url, f"http://127.0.0.1:{port}", token, embedded_pg, embedded_redis_pid)
    state.save(state_dir)

    env = _component_env(state)
    logs = state_dir / "logs"
    state.processes.append(spawn("api", launcher.api_argv(port), env, logs))
    schedule = state_dir / "celerybeat-schedule"
    state.processes.append(spawn("coordinator", launcher.coordinator_argv(schedule), env, logs))
    for index in range(plan.count):
        state.processes.append(spawn(f"worker-{index}", _worker_argv(index, plan), env, logs))
    state.save(state_dir)
    try:
        wait_until_ready(state, plan.count, timeout)
    except Exception:
        stop_stack(state_dir)
        raise
    return state


def wait_until_ready(state: StackState, workers: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dead = [p for p in state.processes if not alive(p.pid)]
        if dead:
            raise RuntimeError(f"{dead[0].name} exited during start-up; see {dead[0].log}")
        if api_ready(state.api_url):
            with session_scope(state.database_url) as session:
                if len(live_workers(session, ttl_seconds=30)) >= workers:
                    return
        time.sleep(0.25)
    raise RuntimeError(f"the stack did not answer within {timeout:.0f} s; logs are in the state directory")


def api_ready(api_url: str) -> bool:
    """Does the API at ``api_url`` answer /ready (database and broker reachable)?"""
    try:
        return httpx.get(f"{api_url}/ready", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def stop_stack(state_dir: Path, grace: float = 15.0) -> list[str]:
    """Stop everything `start_stack` started, workers first. Returns the names stopped."""
    state = StackState.load(state_dir.resolve())
    if state is None:
        return []
    (state_dir.resolve() / STOPPING_FILE).touch()
    stopped = stop_processes(state.processes, grace)
    if state.embedded_redis_pid and alive(state.embedded_redis_pid):
        os.kill(state.embedded_redis_pid, signal.SIGTERM)
        stopped.append("redis")
    if state.embedded_postgres:
        EmbeddedPostgres(Path(state.embedded_postgres)).stop()
        stopped.append("postgres")
    (state_dir.resolve() / STATE_FILE).unlink(missing_ok=True)
    return stopped


def stop_processes(processes: list[ProcessInfo], grace: float) -> list[str]:
    """SIGTERM each process group, last started first; SIGKILL what is still alive after ``grace``
    seconds. Returns the names of those that were running."""
    stopped = []
    for info in reversed(processes):
        if alive(info.pid):
            signal_group(info.pid, signal.SIGTERM)
            stopped.append(info.name)
    deadline = time.monotonic() + grace
    for info in processes:
        while alive(info.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(info.pid):
            signal_group(info.pid, signal.SIGKILL)
    return stopped


class Supervisor:
    """Restarts components of a running stack that exit on their own, for the foreground
    ``kernelfarm up``; a deployment gets the same from systemd ``Restart=on-failure``, compose
    ``restart: unless-stopped`` or Kubernetes. Seen needed: a coordinator exiting on a kombu error
    while Redis restarted (docs/RELIABILITY.md). Like systemd's start limit, a component that exits
    ``burst`` times within ``window_s`` is left down (a crash loop helps no one; its log says why).
    """

    def __init__(self, state: StackState, state_dir: Path, burst: int = 5, window_s: float = 600.0) -> None:
        self.state, self.state_dir = state, state_dir.resolve()
        self.burst, self.window_s = burst, window_s
        self.given_up: set[str] = set()
        self._restarts: dict[str, list[float]] = {}

    def check(self) -> list[str]:
        """Restart what died since the last check. Returns the names restarted."""
        if (self.state_dir / STOPPING_FILE).exists():
            return []
        restarted = []
        now = time.monotonic()
        for index, info in enumerate(self.state.processes):
            if info.name in self.given_up or alive(info.pid) or not info.argv:
                continue
            recent = [t for t in self._restarts.get(info.name, []) if now - t < self.window_s]
            if len(recent) >= self.burst:
                self.given_up.add(info.name)
                logger.error("%s exited %d times in %.0f s; leaving it down (see %s)", info.name, len(recent),
                             self.window_s, info.log)  # fmt: skip
                continue
            logger.warning("%s (pid %d) exited on its own; restarting it", info.name, info.pid)
            self.state.processes[index] = spawn(info.name, info.argv, _component_env(self.state), Path(info.log).parent)
            self._restarts[info.name] = [*recent, now]
            restarted.append(info.name)
        if restarted:
            self.state.save(self.state_dir)
        return restarted


def signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def running_state(state_dir: Path) -> StackState | None:
    state = StackState.load(state_dir.resolve())
    if state is None or not any(alive(p.pid) for p in state.processes):
        return None
    return state if port_open("127.0.0.1", int(state.api_url.rsplit(":", 1)[1])) else None
