"""The embedded default stack: servers + migrations + API + coordinator + N workers, on one host.

``kernelfarm up`` starts it (``--detach`` returns once everything answers), ``kernelfarm down``
stops it. Its state (URLs, pids, a local admin token) lives in ``<state_dir>/stack.json``, readable
only by the user who started it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import secrets
import select
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from kernelfarm import launcher
from kernelfarm.core.db import session_scope
from kernelfarm.core.errors import Unauthorized
from kernelfarm.core.files import read_bounded
from kernelfarm.core.migrate import upgrade
from kernelfarm.core.settings import Settings
from kernelfarm.core.standby import SpareDemand, open_gate, spare_env, standing_by
from kernelfarm.core.store.tokens import authenticate, create_token, revoke_token
from kernelfarm.core.store.workers import live_workers
from kernelfarm.services import EmbeddedPostgres, EmbeddedRedis, free_port, port_open

logger = logging.getLogger(__name__)
STATE_FILE = "stack.json"
# The most of stack.json read (core/files.read_bounded): ours is a few KiB (URLs, and each process's
# command line); anything far larger was not written by `up`.
MAX_STATE_BYTES = 16 << 20
# Written by `down` before it stops anything: a supervising `up` must not restart what `down` stops.
STOPPING_FILE = "stopping"
STACK_TAG = "KERNELFARM_STACK_TAG"  # in every component's environment: the state dir of its stack
GATES_DIR = "gates"  # the warm spares' gates (core/standby.py)
HEALTH_FILE = "components.json"  # the foreground supervisor's view, read by `kernelfarm status` and /ready
# Kept across `down`/`up` (the PostgreSQL data outlives a run): generated server passwords and the local
# admin token, readable by the owner only.
SECRETS_FILE = "secrets.json"
# The API's port when it is free, so a browser tab or a script keeps working across restarts.
DEFAULT_API_PORT = 8765
ADMIN_TOKEN_NAME = "local-stack-admin"
# Supervisor.wait: while a dead component's process group ends or its restart backs off.
PENDING_EXIT_POLL_S = 0.05


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with mode 600 from the start (no moment readable by others)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    path.chmod(0o600)  # an older file keeps its mode through O_CREAT


@dataclass
class StackSecrets:
    postgres_password: str
    redis_password: str
    admin_token: str | None = None

    @classmethod
    def load_or_create(cls, state_dir: Path) -> StackSecrets:
        """The kept secrets, or new ones when there are none. A file that is there but unreadable is an
        error, never replaced: the PostgreSQL data of the state dir only opens with its password."""
        path = state_dir / SECRETS_FILE
        if path.exists():
            try:
                data = json.loads(path.read_text())
                if not isinstance(data, dict):
                    raise ValueError("not a JSON object")
                made = cls(**data)
                if not (isinstance(made.postgres_password, str) and made.postgres_password
                        and isinstance(made.redis_password, str) and made.redis_password
                        and isinstance(made.admin_token, str | None)):  # fmt: skip
                    raise ValueError("its passwords must be non-empty strings")
            except (OSError, ValueError, TypeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]
                raise StackError(
                    f"cannot read {path} ({reason}); it keeps the password of the stack's PostgreSQL data in "
                    f"{state_dir / 'postgres'}: restore it, or move it aside together with that folder to start "
                    "with an empty database"
                ) from None
            if stat.S_IMODE(path.stat().st_mode) & 0o077:  # hand-copied or edited: readable by others
                logger.warning("%s was readable by other users; made private (mode 600)", path)
                path.chmod(0o600)
            return made
        made = cls(secrets.token_urlsafe(24), secrets.token_urlsafe(24))
        made.save(state_dir)
        return made

    def save(self, state_dir: Path) -> None:
        write_private(state_dir / SECRETS_FILE, json.dumps(asdict(self), indent=2))


class StackError(RuntimeError):
    """Something a user can fix (a stale stack, an unreachable folder): one line, no traceback."""


@dataclass
class ProcessInfo:
    name: str
    pid: int
    log: str
    argv: list[str] = field(default_factory=list)  # how to start it again
    # Where its output begins in ``log``: a component started again under its name appends to the
    # file its predecessors wrote.
    log_start: int = 0


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
        write_private(state_dir / STATE_FILE, json.dumps(asdict(self), indent=2))  # holds an admin token

    @classmethod
    def load(cls, state_dir: Path) -> StackState | None:
        """The state of the stack of ``state_dir``; None when it holds none.

        Raises:
            StackError: ``state_dir`` cannot be one (check_state_dir), or its stack.json cannot be read.
        """
        check_state_dir(state_dir)
        path = state_dir / STATE_FILE
        if not path.is_file():
            return None
        try:
            data = json.loads(read_bounded(path, MAX_STATE_BYTES))
            data["processes"] = [ProcessInfo(**p) for p in data.get("processes", [])]
            state = cls(**data)
            pids_ok = all(isinstance(p.pid, int) and p.pid > 0 for p in state.processes)
            if not (isinstance(state.api_url, str) and pids_ok and isinstance(state.embedded_redis_pid, int | None)):
                raise ValueError("a field of the wrong type")
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]
            raise StackError(f"cannot read {path} ({reason}); `kernelfarm down` stops what runs without it") from None
        return state


def check_state_dir(state_dir: Path) -> None:
    """Raise StackError when no file of ``state_dir`` can even be looked for: a name too long for the
    file system, a folder on the way that cannot be searched. Each look-up (``Path.is_file``, which lets
    these errors through) was a traceback in every command, `status` and `down` first.

    A state dir that is not there, or is a file, passes: there is no stack in it (`up` says why it cannot
    make one)."""
    try:
        os.stat(state_dir / STATE_FILE)
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as exc:
        raise StackError(f"cannot use {state_dir} as the state directory: {exc.strerror or exc}") from None


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
    # A zombie (our own exited child) is not alive. But a process's main thread shows as a zombie as soon
    # as it has exited, while the process's other threads may still run, or still be exiting with its
    # files open: a killed Celery worker's Redis connection, blocked in BRPOP, could still be handed a
    # message that then died with it. So every thread must be gone or a zombie.
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True  # no /proc here: the signal's answer stands
    return any(_thread_running(pid, thread) for thread in threads)


def _thread_running(pid: int, thread: str) -> bool:
    try:
        with open(f"/proc/{pid}/task/{thread}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] not in ("Z", "X")
    except OSError:
        return False  # released between the listing and the read


def spawn(name: str, argv: list[str], env: dict[str, str], log_dir: Path, cwd: Path | None = None) -> ProcessInfo:
    """Start ``argv`` in its own session, its output appended to ``<log_dir>/<name>.log``; ``cwd`` is
    its working directory (the caller's when None)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    log_start = log_path.stat().st_size if log_path.exists() else 0
    with open(log_path, "ab") as log:
        # A new session: `down` stops the whole process group, Celery's children included.
        process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # fmt: skip
    return ProcessInfo(name=name, pid=process.pid, log=str(log_path), argv=list(argv), log_start=log_start)


def _worker_argv(index: int, plan: WorkerPlan) -> list[str]:
    """The command line of the plan's worker number ``index`` (cuda, triton: on GPU ``index``)."""
    return launcher.worker_argv(f"{plan.backend}{index}", backend=plan.backend,
                                gpu=index if plan.backend in ("cuda", "triton") else None, landscapes=plan.landscapes,
                                sleep_ms=plan.sleep_ms, time_scale=plan.time_scale)  # fmt: skip


METRICS_DIR = "metrics"


def _component_env(state: StackState, state_dir: Path | None = None) -> dict[str, str]:
    overrides = None
    if state_dir:
        # STACK_TAG: `down` finds every process of the stack by it, also one that left its process group
        # or outlived a restarted parent (a Celery beat orphaned by a killed coordinator survived `down`).
        overrides = {"KERNELFARM_STACK_HEALTH_FILE": str(state_dir / HEALTH_FILE), STACK_TAG: str(state_dir)}
    env = launcher.component_env(state.database_url, state.redis_url, api_url=state.api_url, overrides=overrides)
    if state_dir is not None:
        # The API's /metrics sums what the API and the coordinator's pool processes leave here (core/metrics.py).
        env["PROMETHEUS_MULTIPROC_DIR"] = str(state_dir / METRICS_DIR)
    return env


def tagged_processes(state_dir: Path) -> list[int]:
    """Live processes started by the stack of ``state_dir`` (their environment carries its tag)."""
    tag = f"{STACK_TAG}={state_dir.resolve()}".encode()
    found = []
    for pid in _all_pids():
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                tagged = tag in handle.read().split(b"\0")
        except OSError:
            continue
        if tagged and alive(pid):
            found.append(pid)
    return found


def owned_groups(state_dir: Path) -> set[int]:
    """The process groups in which a process of the stack of ``state_dir`` still runs (one carrying its
    tag). A pid in stack.json that no longer is in one of them belongs to someone else now (pids are
    reused): it is never signalled, nor reported as the stack's."""
    return {group for pid in tagged_processes(state_dir) if (group := _pgid_of(pid)) is not None}


def redis_pids(state_dir: Path, recorded: int | None = None) -> list[int]:
    """The embedded Redis servers of ``state_dir`` that still run: redis-server works in its data dir
    (``--dir``), so a process whose working directory is ``<state_dir>/redis`` is one; ``recorded``
    (stack.json's pid) counts only if it is such a process."""
    folder = str(state_dir.resolve() / "redis")

    def serves(pid: int) -> bool:
        try:
            return os.readlink(f"/proc/{pid}/cwd") == folder and alive(pid)
        except OSError:
            return False

    candidates = [recorded] if recorded else []
    candidates += [pid for pid in _all_pids() if pid != recorded]
    return [pid for pid in candidates if serves(pid)]


def _load_any(state_dir: Path, warn: bool = False) -> StackState | None:
    """stack.json, or None when there is none or it cannot be read (what runs is then found by its tag)."""
    try:
        return StackState.load(state_dir)
    except StackError as exc:
        if warn:
            logger.warning("%s", exc)
        return None


def survivors(state_dir: Path) -> list[str]:
    """What of a stack started from ``state_dir`` still runs, as "name (pid N)": its components, its
    Redis and the PostgreSQL on its data directory (found from postmaster.pid even without stack.json)."""
    state_dir = state_dir.resolve()
    check_state_dir(state_dir)  # before _load_any, which swallows it
    state = _load_any(state_dir)
    owned = owned_groups(state_dir)
    left = []
    if state is not None:
        left += [f"{p.name} (pid {p.pid})" for p in state.processes if p.pid in owned]
    left += [f"redis (pid {pid})" for pid in redis_pids(state_dir, state.embedded_redis_pid if state else None)]
    listed = {p.pid for p in state.processes if p.pid in owned} if state else set()
    left += [f"stray component process (pid {pid})" for pid in tagged_processes(state_dir)
             if _pgid_of(pid) not in listed]  # fmt: skip
    postgres_dir = Path(state.embedded_postgres) if state and state.embedded_postgres else state_dir / "postgres"
    pid = EmbeddedPostgres(postgres_dir).server_pid()
    if pid is not None:
        left.append(f"postgres (pid {pid})")
    return left


def choose_api_port(requested: int | None) -> int:
    if requested:
        return requested
    free = not port_open("127.0.0.1", DEFAULT_API_PORT) and _bindable(DEFAULT_API_PORT)
    return DEFAULT_API_PORT if free else free_port()


def _bindable(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def local_admin_token(database_url: str, kept: StackSecrets, state_dir: Path) -> str:
    """The stack's admin token: the one kept in the secrets file while it is still valid; else a new
    one, after revoking every earlier token of that name (one `up` after another mints no new token)."""
    with session_scope(database_url) as session:
        if kept.admin_token:
            try:
                authenticate(session, kept.admin_token)
                return kept.admin_token
            except Unauthorized:
                pass
        revoke_token(session, ADMIN_TOKEN_NAME)
        kept.admin_token = create_token(session, ADMIN_TOKEN_NAME, ["admin"])
    kept.save(state_dir)
    return kept.admin_token


def start_stack(settings: Settings, state_dir: Path, plan: WorkerPlan, api_port: int | None = None,
                timeout: float = 120.0) -> StackState:  # fmt: skip
    """Start the stack; raises StackError (one line) for a stack that is still (partly) running, and
    InvalidInput for a DATABASE_URL the farm cannot use (before anything is made)."""
    database_url = settings.checked_database_url() or ""
    state_dir = state_dir.resolve()
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        probe = state_dir / ".kernelfarm-write-test"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise StackError(f"cannot use {state_dir} as the state directory: {exc.strerror or exc}") from None
    if api_port is not None and not (0 < api_port < 65536):
        raise StackError(f"API port {api_port} is not a TCP port (1-65535, or 0 for a free one)")
    if api_port and not _bindable(api_port):
        raise StackError(f"API port {api_port} is in use; choose another --api-port, or 0 for a free one")
    left = survivors(state_dir)
    if left:
        raise StackError(f"a stack from {state_dir} is still running ({', '.join(left)}); "
                         f"stop it with `kernelfarm down --state-dir {state_dir}` first")  # fmt: skip
    if (state_dir / STATE_FILE).exists():
        logger.warning("an earlier stack in %s ended without `kernelfarm down`; starting afresh", state_dir)
        (state_dir / STATE_FILE).unlink()
    (state_dir / STOPPING_FILE).unlink(missing_ok=True)
    (state_dir / HEALTH_FILE).unlink(missing_ok=True)  # an earlier foreground run's view
    shutil.rmtree(state_dir / GATES_DIR, ignore_errors=True)  # an earlier run's spares' gates
    kept = StackSecrets.load_or_create(state_dir)

    # Whatever fails or interrupts (Ctrl-C, SIGTERM: `up` raises KeyboardInterrupt for it) from here on
    # stops what was started: stack.json always lists it, saved as each part starts.
    state = StackState(database_url, settings.redis_url or "", "", "")
    try:
        _start_servers(state, state_dir, kept)
        upgrade(state.database_url)
        state.token = local_admin_token(state.database_url, kept, state_dir)
        state.save(state_dir)
        shutil.rmtree(state_dir / METRICS_DIR, ignore_errors=True)  # the last run's samples
        (state_dir / METRICS_DIR).mkdir()
        logs = state_dir / "logs"
        _start_api(state, state_dir, api_port, logs)
        env = _component_env(state, state_dir)
        schedule = state_dir / "celerybeat-schedule"
        state.processes.append(spawn("coordinator", launcher.coordinator_argv(schedule), env, logs))
        state.save(state_dir)
        for index in range(plan.count):
            state.processes.append(spawn(f"worker-{index}", _worker_argv(index, plan), env, logs))
            state.save(state_dir)
        wait_until_ready(state, plan.count, timeout)
    except BaseException as exc:
        stop_stack(state_dir)
        if isinstance(exc, StackError) or not isinstance(exc, RuntimeError | OSError):
            raise
        raise StackError(str(exc)) from None  # the API exited, the stack did not answer in time, ...
    return state


def _start_servers(state: StackState, state_dir: Path, kept: StackSecrets) -> None:
    """The embedded PostgreSQL and Redis, unless DATABASE_URL / REDIS_URL name servers; each recorded
    in stack.json as soon as it runs."""
    try:
        if not state.database_url:
            postgres = EmbeddedPostgres(state_dir / "postgres", password=kept.postgres_password, boundary=state_dir)
            state.embedded_postgres = str(postgres.data_dir)
            state.save(state_dir)
            postgres.start()
            state.database_url = postgres.url
            state.save(state_dir)
        if not state.redis_url:
            redis = EmbeddedRedis(state_dir / "redis", password=kept.redis_password)
            redis.start()
            state.redis_url, state.embedded_redis_pid = redis.url, redis.pid
            state.save(state_dir)
    except subprocess.CalledProcessError as exc:
        output = (exc.stderr or b"").decode(errors="replace").strip().splitlines()
        why = output[-1] if output else str(exc)
        server_log = state_dir / "postgres" / "server.log"
        if "log output" in why and server_log.is_file():  # pg_ctl's "Examine the log output.": say what it says
            lines = server_log.read_text(errors="replace").strip().splitlines()
            why = f"{lines[-1] if lines else why} (log: {server_log})"
        raise StackError(f"{Path(str(exc.cmd[0])).name} failed: {why}") from None


def _start_api(state: StackState, state_dir: Path, requested_port: int | None, logs: Path) -> None:
    """Start the API and wait until it answers. On the default port, another stack starting at the same
    moment may win the race for it: then once more on a free port."""
    for attempt in range(2):
        port = choose_api_port(requested_port) if attempt == 0 else free_port()
        state.api_url = f"http://127.0.0.1:{port}"
        api = spawn("api", launcher.api_argv(port), _component_env(state, state_dir), logs)
        state.processes[:] = [api]
        state.save(state_dir)
        deadline = time.monotonic() + 60

        def answering(pid: int = api.pid, port: int = port) -> bool:  # ours, not another stack's on that port
            return _listens(pid, port) and api_ready(state.api_url)

        while alive(api.pid) and not answering() and time.monotonic() < deadline:
            time.sleep(0.2)
        if alive(api.pid) and answering():
            return
        if alive(api.pid):
            raise RuntimeError(f"the API did not answer within 60 s; see {api.log}")
        if requested_port or port != DEFAULT_API_PORT:
            break
        logger.warning("the API could not take port %d; trying a free port", port)
    raise RuntimeError(f"the API exited during start-up; see {logs / 'api.log'}")


def _listens(pid: int, port: int) -> bool:
    import psutil

    try:
        connections = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.Error:
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in connections)


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


@dataclass
class StopReport:
    stopped: list[str]  # what was running and was stopped
    left: list[str]  # what still runs after stopping ("name (pid N)" or why): empty when all is gone


def stop_stack(state_dir: Path, grace: float = 15.0) -> list[str]:
    """Stop everything `start_stack` started, workers first. Returns the names stopped (what could not
    be stopped is logged; `stop_stack_checked` returns it)."""
    report = stop_stack_checked(state_dir, grace)
    for item in report.left:
        logger.error("still running after stop: %s", item)
    return report.stopped


def stop_stack_checked(state_dir: Path, grace: float = 15.0) -> StopReport:
    """Stop the stack, then check that every component is gone (the process groups of the
    components, Redis, and PostgreSQL by its postmaster.pid). The state file is removed only then,
    so `down` can be run again for what survived."""
    state_dir = state_dir.resolve()
    check_state_dir(state_dir)  # before _load_any, which turns it into a warning
    state = _load_any(state_dir, warn=True)
    postgres = EmbeddedPostgres(Path(state.embedded_postgres) if state and state.embedded_postgres
                                else state_dir / "postgres")  # fmt: skip
    redis = redis_pids(state_dir, state.embedded_redis_pid if state else None)
    if state is None and postgres.server_pid() is None and not tagged_processes(state_dir) and not redis:
        if (state_dir / STATE_FILE).is_file():  # unreadable, and nothing of it runs
            (state_dir / STATE_FILE).unlink()
        return StopReport([], [])
    (state_dir / STOPPING_FILE).touch()
    stopped: list[str] = []
    problems: list[str] = []
    owned = owned_groups(state_dir)
    if state is not None:
        for info in state.processes:
            if info.pid not in owned and group_alive(info.pid):
                logger.warning("pid %d (%s in stack.json) is not the stack's any more; left alone", info.pid, info.name)
        stopped += stop_processes([info for info in state.processes if info.pid in owned], grace)
    # Orphans outside the components' process groups (see _component_env): all at once, not one by one
    # (a stack of many workers interrupted during start-up took minutes).
    strays = [pid for pid in tagged_processes(state_dir) if alive(pid)]
    for pid in strays:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    _wait_all_gone(strays, 5)
    stopped += [f"stray pid {pid}" for pid in strays]
    if redis:
        for pid in redis:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        _wait_all_gone(redis, grace)
        stopped.append("redis")
    if postgres.server_pid() is not None:
        why = postgres.stop()
        if why:
            problems.append(why)
        else:
            stopped.append("postgres")
    left = [item for item in survivors(state_dir) if not item.startswith("postgres") or not problems]
    left += problems
    if not left:
        (state_dir / STATE_FILE).unlink(missing_ok=True)
        (state_dir / HEALTH_FILE).unlink(missing_ok=True)
    return StopReport(stopped, left)


def _wait_all_gone(pids: list[int], grace: float) -> None:
    """Wait up to ``grace`` seconds for every one of ``pids`` to exit; SIGKILL those that did not."""
    _wait_until(lambda: not any(alive(pid) for pid in pids), grace)
    for pid in pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    _wait_until(lambda: not any(alive(pid) for pid in pids), 5)


def _wait_until(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def group_alive(pgid: int) -> bool:
    """Does any process of the process group ``pgid`` (a component and its children) still run?"""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Zombies of our own children count as gone.
    return alive(pgid) or any(_pgid_of(pid) == pgid and alive(pid) for pid in _all_pids())


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _pgid_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def stop_processes(processes: list[ProcessInfo], grace: float) -> list[str]:
    """SIGTERM each process group, last started first; SIGKILL what is still alive after ``grace``
    seconds. Returns the names of those that were running."""
    stopped = []
    for info in reversed(processes):
        if group_alive(info.pid):
            signal_group(info.pid, signal.SIGTERM)
            stopped.append(info.name)
    deadline = time.monotonic() + grace
    for info in processes:
        while group_alive(info.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if group_alive(info.pid):  # the component or a child of it (Celery's pool, its beat)
            signal_group(info.pid, signal.SIGKILL)
            _wait_until(lambda pgid=info.pid: not group_alive(pgid), 5)  # type: ignore[misc]
    return stopped


@dataclass
class ComponentHealth:
    state: str  # "running", "restarting" (waiting out its backoff), "crash-looping" or "gave up"
    exits: int  # exits within the supervisor's window
    log: str
    restart_in_s: float = 0.0


def read_health(state_dir: Path) -> dict[str, ComponentHealth]:
    path = state_dir.resolve() / HEALTH_FILE
    try:
        return {name: ComponentHealth(**item) for name, item in json.loads(path.read_text()).items()}
    except (OSError, ValueError, TypeError):
        return {}


class Supervisor:
    """Restarts components of a running stack that exit on their own, for the foreground
    ``kernelfarm up``, the way a deployment does (systemd ``Restart=on-failure``, Kubernetes'
    CrashLoopBackOff): at once the first time, then after a delay that doubles with each further
    exit up to ``backoff_max_s``, back to nothing once a component has run ``stable_s`` seconds.
    Seen needed: a coordinator exiting on a kombu error while Redis restarted, and six workers
    killed 80 times by a fault injector (docs/RELIABILITY.md); the old start limit left them all down.

    A component that exits ``burst`` times within ``window_s`` is *crash-looping*: still restarted,
    but logged as an error and shown as such in ``<state_dir>/components.json``, which `kernelfarm
    status` prints and the API's /ready reports (503). With ``give_up_after`` set, a component is
    left down after that many exits in the window ("gave up"), as loudly.

    With ``spares``, each component but the API has a warm spare (core/standby.py): the same
    command, started ahead and held at its gate, promoted when the component dies (a worker under the
    same name, so it ends the leases its dead predecessor left as soon as it holds its lock), after
    the same backoff a restart would wait; a new spare is started in its place. A spare that died
    waiting is replaced by a start from nothing. While promotions find their spare still starting
    (deaths faster than a spare starts), a component keeps a second spare (core/standby.py's
    SpareDemand), until a minute passes without that.
    """

    def __init__(self, state: StackState, state_dir: Path, burst: int = 5, window_s: float = 600.0,
                 backoff_start_s: float = 1.0, backoff_max_s: float = 60.0, stable_s: float = 60.0,
                 give_up_after: int | None = None, spares: bool = False,
                 spare_window_s: float = 60.0) -> None:  # fmt: skip
        self.state, self.state_dir = state, state_dir.resolve()
        self.spares: dict[str, list[tuple[ProcessInfo, Path]]] = {}  # per component, oldest first
        self._demands: dict[str, SpareDemand] = {}
        self._spare_window_s = spare_window_s
        self._pidfds: dict[int, int] = {}  # component pid -> its pidfd (see wait)
        self._spare_count = itertools.count()
        if spares:
            for info in state.processes:
                if info.name != "api" and info.argv:
                    self._start_spare(info)
        self.burst, self.window_s, self.give_up_after = burst, window_s, give_up_after
        self.backoff_start_s, self.backoff_max_s, self.stable_s = backoff_start_s, backoff_max_s, stable_s
        self.given_up: set[str] = set()
        self.crash_looping: set[str] = set()
        self._exits: dict[str, list[float]] = {}
        self._started: dict[str, float] = {p.name: time.monotonic() for p in state.processes}
        self._streak: dict[str, int] = {}  # exits without a stable run in between
        self._restart_at: dict[str, float] = {}
        self.write_health()

    def stopping(self) -> bool:
        """`kernelfarm down` is stopping (or has stopped) the stack: nothing is to be restarted."""
        return (self.state_dir / STOPPING_FILE).exists()

    def check(self) -> list[str]:
        """Restart what died and has waited out its backoff. Returns the names restarted."""
        if self.stopping():
            return []
        restarted = []
        now = time.monotonic()
        for index, info in enumerate(self.state.processes):
            name = info.name
            if name in self.given_up or not info.argv or group_alive(info.pid):
                continue
            if name not in self._restart_at:  # a new exit: decide when to restart it
                self._note_exit(info, now)
                if name in self.given_up:
                    continue
            if now < self._restart_at[name]:
                continue
            logger.warning("%s (pid %d) exited on its own; restarting it", name, info.pid)
            spares = self.spares.get(name)
            if spares is not None:
                for spare in [spare for spare in spares if not alive(spare[0].pid)]:  # died waiting: no spare
                    signal_group(spare[0].pid, signal.SIGKILL)  # what it started, if anything is left
                    spares.remove(spare)
            if spares:
                promoted, gate = spares.pop(0)
                self._demands[name].promoted(ready=standing_by(gate) >= 1, now=now)
                open_gate(gate)
                self.state.processes[index] = promoted
            else:
                self.state.processes[index] = spawn(
                    name, info.argv, _component_env(self.state, self.state_dir), Path(info.log).parent
                )
            if spares is not None:
                while len(spares) < self._demands[name].wanted(now):
                    self._start_spare(self.state.processes[index])
            self._started[name] = now
            del self._restart_at[name]
            restarted.append(name)
        if restarted:
            self.state.save(self.state_dir)
        self._trim_spares(now)
        self.write_health()
        return restarted

    def _trim_spares(self, now: float) -> None:
        """Stop the spares a component no longer wants (the newest first: most likely still starting)."""
        for name, spares in self.spares.items():
            for _ in range(self._demands[name].surplus(len(spares), now)):
                signal_group(spares.pop()[0].pid, signal.SIGKILL)

    def _start_spare(self, info: ProcessInfo) -> None:
        """A spare of ``info``'s component: its command, held at a gate of its own (its log is the
        component's: a promoted spare goes on writing where its predecessor did)."""
        gate = self.state_dir / GATES_DIR / f"{info.name}-{next(self._spare_count)}"
        env = {**_component_env(self.state, self.state_dir), **spare_env(gate)}
        self._demands.setdefault(info.name, SpareDemand(base=1, most=2, window_s=self._spare_window_s))
        self.spares.setdefault(info.name, []).append((spawn(info.name, info.argv, env, Path(info.log).parent), gate))

    def stop_spares(self) -> None:
        for spares in self.spares.values():
            for spare, _ in spares:
                signal_group(spare.pid, signal.SIGKILL)
        self.spares.clear()

    def close(self) -> None:
        """Stop the spares and let go of the pidfds :meth:`wait` holds."""
        self.stop_spares()
        for descriptor in self._pidfds.values():
            os.close(descriptor)
        self._pidfds.clear()

    def wait(self, timeout: float) -> None:
        """Sleep up to ``timeout`` seconds, waking the moment a supervised component's process exits
        (a pidfd each, Linux 5.3+; elsewhere the whole timeout), so :meth:`check` replaces it within
        milliseconds of its death rather than up to a polling period later: a killed coordinator
        left every job unstepped for that long, a killed worker its GPU idle (docs/RELIABILITY.md)."""
        supervised = [info for info in self.state.processes if info.name not in self.given_up and info.argv]
        now = time.monotonic()
        watched = {info.pid for info in supervised if alive(info.pid)}
        # A death being handled: its pidfd stays readable, so it is not watched; look again when its
        # restart is due (its process group still ending: shortly; its backoff running: at its end).
        due = [self._restart_at.get(info.name, now) for info in supervised if info.pid not in watched]
        if due:
            timeout = min(timeout, max(PENDING_EXIT_POLL_S, min(due) - now))
        for pid in set(self._pidfds) - watched:  # replaced components
            os.close(self._pidfds.pop(pid))
        for pid in watched - set(self._pidfds):
            with contextlib.suppress(OSError, AttributeError):  # gone already; no pidfd_open here
                self._pidfds[pid] = os.pidfd_open(pid)
        if self._pidfds:
            select.select(list(self._pidfds.values()), [], [], timeout)
        else:
            time.sleep(timeout)

    def _note_exit(self, info: ProcessInfo, now: float) -> None:
        name = info.name
        exits = [t for t in self._exits.get(name, []) if now - t < self.window_s] + [now]
        self._exits[name] = exits
        ran = now - self._started.get(name, now)
        self._streak[name] = 1 if ran >= self.stable_s else self._streak.get(name, 0) + 1
        if self.give_up_after is not None and len(exits) >= self.give_up_after:
            self.given_up.add(name)
            logger.error("GAVE UP on %s: it exited %d times in %.0f s; it stays down (see %s)", name, len(exits),
                         self.window_s, info.log)  # fmt: skip
            return
        if len(exits) >= self.burst and name not in self.crash_looping:
            self.crash_looping.add(name)
            logger.error("%s is CRASH-LOOPING: %d exits in %.0f s; still restarting it with backoff (see %s)", name,
                         len(exits), self.window_s, info.log)  # fmt: skip
        elif len(exits) < self.burst:
            self.crash_looping.discard(name)
        streak = self._streak[name]
        delay = 0.0 if streak <= 1 else min(self.backoff_max_s, self.backoff_start_s * 2 ** (streak - 2))
        self._restart_at[name] = now + delay

    def health(self) -> dict[str, ComponentHealth]:
        now = time.monotonic()
        out = {}
        for info in self.state.processes:
            exits = len([t for t in self._exits.get(info.name, []) if now - t < self.window_s])
            if info.name in self.given_up:
                state = "gave up"
            elif info.name in self.crash_looping:
                state = "crash-looping"
            elif info.name in self._restart_at:
                state = "restarting"
            else:
                state = "running"
            wait = max(0.0, self._restart_at.get(info.name, now) - now)
            out[info.name] = ComponentHealth(state, exits, info.log, round(wait, 1))
        return out

    def write_health(self) -> None:
        data = {name: asdict(item) for name, item in self.health().items()}
        path = self.state_dir / HEALTH_FILE
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(data, indent=2))
        temporary.replace(path)


def signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def running_state(state_dir: Path) -> StackState | None:
    state = StackState.load(state_dir.resolve())
    if state is None or not state.api_url or not owned_groups(state_dir) & {p.pid for p in state.processes}:
        return None
    return state if port_open("127.0.0.1", int(state.api_url.rsplit(":", 1)[1])) else None
