"""A farm of real processes on servers this harness owns, for fault injection.

Unlike the test suite's shared services, the PostgreSQL and Redis here are embedded servers started
in the harness's own directory, so restarting, flushing or killing them touches nothing else on the
machine. Every component is a real process (uvicorn, Celery coordinator, Celery solo workers),
started through the ``kernelfarm`` CLI exactly as an operator would (command lines from
:mod:`kernelfarm.launcher`).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import create_engine, text

from kernelfarm import launcher
from kernelfarm.core.migrate import upgrade
from kernelfarm.core.standby import SpareDemand, open_gate, spare_env, standing_by
from kernelfarm.services import EmbeddedPostgres, EmbeddedRedis, free_port, wait_for
from kernelfarm.stack import ProcessInfo, alive, api_ready, spawn
from kernelfarm.testing.clocks import FAST_TIMINGS
from kernelfarm.testing.recordings import CONVOLUTION

logger = logging.getLogger(__name__)


@dataclass
class ChaosFarm:
    """API, coordinator and replay workers on an embedded PostgreSQL and Redis, all under ``directory``.

    ``cwd`` is the components' working directory (the caller's when None); ``extra_env`` is passed to
    every component after the fast clocks (``fast_clocks=False``: the farm's default settings).

    Warm spares (core/standby.py) are kept: ``coordinator_spares`` of the coordinator and
    ``worker_spares`` of each kind of worker started, as many again while promotions find their spare
    still starting (core/standby.py's SpareDemand, as `kernelfarm up` keeps them). A restart
    (``start_coordinator``, ``start_worker`` without a name) promotes one and starts another in its
    place. With 0, every restart of that component starts it from nothing.
    """

    directory: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    fast_clocks: bool = True
    postgres: EmbeddedPostgres | None = None
    redis_server: EmbeddedRedis | None = None
    api_port: int = 0
    processes: dict[str, ProcessInfo] = field(default_factory=dict)
    # Components that died without being killed here, and were restarted by supervise().
    unplanned_restarts: list[str] = field(default_factory=list)
    _names: itertools.count = field(default_factory=itertools.count)
    _worker_args: dict[str, tuple[float, tuple[Path, ...], dict[str, str]]] = field(default_factory=dict)
    worker_spares: int = 0
    coordinator_spares: int = 0
    # Spares held at their gates, not yet in ``processes``: (name, process, gate) by kind of worker.
    spare_workers: dict[tuple[Any, ...], list[tuple[str, ProcessInfo, Path]]] = field(default_factory=dict)
    spare_coordinators: list[tuple[ProcessInfo, Path]] = field(default_factory=list)
    # Workers stopped with SIGSTOP, and when to let each go on (monotonic clock).
    paused: dict[str, float] = field(default_factory=dict)
    # For each promotion: was the spare at its gate already (else it was still starting)?
    promotions: list[bool] = field(default_factory=list)
    # How many spares each kind of worker (and the coordinator, under None) wants now, and for how long
    # a promotion that found its spare still starting counts (core/standby.py's SpareDemand).
    _demands: dict[Any, SpareDemand] = field(default_factory=dict)
    spare_window_s: float = 60.0

    # ------------------------------------------------------------------ servers
    @property
    def database_url(self) -> str:
        assert self.postgres is not None
        return self.postgres.url.rsplit("/", 1)[0] + "/kernelfarm"

    @property
    def redis_url(self) -> str:
        assert self.redis_server is not None
        return self.redis_server.url

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def start_servers(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.postgres = EmbeddedPostgres(self.directory / "postgres")
        self.postgres.start()
        engine = create_engine(self.postgres.url, isolation_level="AUTOCOMMIT")
        with engine.connect() as connection:
            connection.execute(text("DROP DATABASE IF EXISTS kernelfarm"))
            connection.execute(text("CREATE DATABASE kernelfarm"))
        engine.dispose()
        upgrade(self.database_url)
        self.redis_server = EmbeddedRedis(self.directory / "redis")
        self.redis_server.start()
        self.api_port = free_port()

    def restart_postgres(self, down_seconds: float = 1.0) -> None:
        """Immediate shutdown (like a crash: clients see their connections die) and a restart on
        the same port after ``down_seconds``."""
        assert self.postgres is not None
        self.postgres.stop("immediate")
        time.sleep(down_seconds)
        self.postgres.start()

    def flush_and_restart_redis(self, down_seconds: float = 1.0) -> None:
        """Every queued and unacknowledged message is lost: FLUSHALL, then kill -9 and start an
        empty server on the same port (it never persists anything)."""
        assert self.redis_server is not None and self.redis_server.pid is not None
        with contextlib.suppress(redis.RedisError):
            redis.Redis.from_url(self.redis_url).flushall()
        pid = self.redis_server.pid
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not alive(pid), 10, "redis to die")
        time.sleep(down_seconds)
        self.redis_server.start()

    # ------------------------------------------------------------------ components
    def env(self, **extra: str) -> dict[str, str]:
        overrides = {**(FAST_TIMINGS if self.fast_clocks else {}), **self.extra_env, **extra}
        return launcher.component_env(self.database_url, self.redis_url, overrides=overrides)

    def _start(self, name: str, argv: list[str], **env: str) -> ProcessInfo:
        info = spawn(name, argv, self.env(**env), self.directory / "logs", cwd=self.cwd)
        self.processes[name] = info
        return info

    def start_api(self, workers: int = 1) -> ProcessInfo:
        info = self._start("api", launcher.api_argv(self.api_port, workers=workers))
        wait_for(self.api_ready, 60, "the API")
        return info

    def api_ready(self) -> bool:
        return api_ready(self.api_url)

    def start_coordinator(self) -> ProcessInfo:
        self.spare_coordinators[:] = [spare for spare in self.spare_coordinators if alive(spare[0].pid)]
        demand = self._demand(None, self.coordinator_spares)
        if self.spare_coordinators:
            info, gate = self.spare_coordinators.pop(0)
            self.promotions.append(standing_by(gate) >= 2)
            demand.promoted(self.promotions[-1])
            open_gate(gate)
            self.processes["coordinator"] = info
        else:
            info = self._start("coordinator", launcher.coordinator_argv(self.directory / "celerybeat-schedule"))
        while len(self.spare_coordinators) < demand.wanted():
            number = next(self._names)
            gate = self.directory / "gates" / f"coordinator-{number}"
            argv = launcher.coordinator_argv(self.directory / "celerybeat-schedule")
            env = self.env(**spare_env(gate))
            spare = spawn(f"coordinator-spare-{number}", argv, env, self.directory / "logs", cwd=self.cwd)
            self.spare_coordinators.append((spare, gate))
        return info

    def coordinator_ready(self) -> bool:
        """The coordinator's Celery worker consumes its queue (its log says so once it does)."""
        return "coordinator" in self.processes and " ready." in self.component_log("coordinator")

    def worker_ready(self, name: str) -> bool:
        """Worker ``name`` has registered and consumes its queue (its log says so once it does; a
        restart under the name counts only its own lines)."""
        return " ready." in self.component_log(name)

    def start_worker(
        self, sleep_ms: float = 0.0, landscapes: Sequence[Path] = (CONVOLUTION,), name: str | None = None, **env: str
    ) -> ProcessInfo:
        """A replay worker; ``name`` reuses a worker's name (a restart), a fresh one (or a spare's) when None."""
        kind = (sleep_ms, tuple(landscapes), tuple(sorted(env.items())))
        spares = self.spare_workers.setdefault(kind, [])
        spares[:] = [spare for spare in spares if alive(spare[1].pid)]  # one that died waiting is no spare
        demand = self._demand(kind, self.worker_spares)
        if name is None and spares:
            name, info, gate = spares.pop(0)
            self.promotions.append(standing_by(gate) >= 1)
            demand.promoted(self.promotions[-1])
            open_gate(gate)
            self.processes[name] = info
        else:
            name = name or f"w{next(self._names)}"
            info = self._start(name, launcher.worker_argv(name, landscapes=landscapes, sleep_ms=sleep_ms), **env)
        self._worker_args[name] = (sleep_ms, tuple(landscapes), env)
        while len(spares) < demand.wanted():
            spare_name = f"w{next(self._names)}"
            gate = self.directory / "gates" / spare_name
            argv = launcher.worker_argv(spare_name, landscapes=landscapes, sleep_ms=sleep_ms)
            spare = spawn(spare_name, argv, self.env(**env, **spare_env(gate)), self.directory / "logs", cwd=self.cwd)
            spares.append((spare_name, spare, gate))
        return info

    def _demand(self, kind: Any, base: int) -> SpareDemand:
        return self._demands.setdefault(kind, SpareDemand(base, most=2 * base, window_s=self.spare_window_s))

    def trim_spares(self) -> None:
        """Stop the spares beyond what each kind wants now (the newest first: most likely still starting)."""
        pools: list[tuple[Any, list[Any]]] = [(None, self.spare_coordinators)]
        pools += [(kind, spares) for kind, spares in self.spare_workers.items()]
        for kind, spares in pools:
            demand = self._demands.get(kind)
            for _ in range(demand.surplus(len(spares)) if demand else 0):
                entry = spares.pop()  # (process, gate) of a coordinator, (name, process, gate) of a worker
                info = entry[0] if kind is None else entry[1]
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(info.pid, signal.SIGKILL)

    def spares_standing_by(self) -> bool:
        """Every spare waits at its gate (core/standby.py: each process marks its arrival)."""
        workers = [gate for kind in self.spare_workers.values() for _, _, gate in kind]
        # a coordinator is two processes at their gates: its Celery worker and its scheduler
        coordinators = [gate for _, gate in self.spare_coordinators]
        return all(standing_by(g) >= 1 for g in workers) and all(standing_by(g) >= 2 for g in coordinators)

    def supervise(self) -> list[str]:
        """Restart components that exited without being killed here, as a deployment's restart
        policy does (systemd ``Restart=``, compose ``restart: unless-stopped``, Kubernetes). Seen:
        a coordinator exiting on a kombu error while Redis was down (celery/kombu#582).

        Returns:
            The names restarted now (also appended to ``unplanned_restarts``).
        """
        restarted = []
        for name, info in list(self.processes.items()):
            if alive(info.pid):
                continue
            logger.warning("%s (pid %s) exited on its own; restarting it", name, info.pid)
            del self.processes[name]
            if name == "api":
                self.start_api()
            elif name == "coordinator":
                self.start_coordinator()
            else:
                sleep_ms, landscapes, env = self._worker_args.pop(name)
                self.start_worker(sleep_ms, landscapes, **env)
            restarted.append(name)
        self.unplanned_restarts += restarted
        self.trim_spares()
        return restarted

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        info = self.processes.pop(name)
        self.paused.pop(name, None)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(info.pid, sig)
        wait_for(lambda: not alive(info.pid), 20, f"{name} to exit")

    def workers(self) -> list[str]:
        """The workers alive and not paused."""
        return [n for n, p in self.processes.items() if n.startswith("w") and alive(p.pid) and n not in self.paused]

    def pause(self, name: str, seconds: float) -> None:
        """Stop worker ``name`` (SIGSTOP, its whole process group) for ``seconds``: alive, holding its
        connections and its presence lock, sending nothing; :meth:`resume_due` lets it go on."""
        os.killpg(self.processes[name].pid, signal.SIGSTOP)
        self.paused[name] = time.monotonic() + seconds

    def resume_due(self) -> list[str]:
        """Let the paused workers whose time is up go on (SIGCONT). Returns their names."""
        due = [name for name, at in self.paused.items() if time.monotonic() >= at]
        for name in due:
            del self.paused[name]
            if name in self.processes:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.processes[name].pid, signal.SIGCONT)
        return due

    def component_log(self, name: str) -> str:
        """The log of the component serving as ``name`` now (a promoted spare's is its own file) from
        where that process started writing: a predecessor's " ready." or housekeeping under the same
        name would otherwise pass for its own (``log`` reads the whole file)."""
        info = self.processes[name]
        path = Path(info.log)
        return path.read_bytes()[info.log_start :].decode(errors="replace") if path.exists() else ""

    def log(self, name: str) -> str:
        path = self.directory / "logs" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        for kind in self.spare_workers.values():
            for name, info, _ in kind:
                self.processes[f"spare {name}"] = info
        for number, (info, _) in enumerate(self.spare_coordinators):
            self.processes[f"spare coordinator {number}"] = info
        self.spare_workers.clear()
        self.spare_coordinators.clear()
        for name in list(self.processes):
            with contextlib.suppress(TimeoutError):
                self.kill(name, signal.SIGTERM if name == "api" else signal.SIGKILL)
        if self.redis_server is not None and self.redis_server.pid and alive(self.redis_server.pid):
            os.kill(self.redis_server.pid, signal.SIGKILL)
        if self.postgres is not None:
            self.postgres.stop("immediate")
