"""Shared fixtures: real PostgreSQL, real Redis, real Celery worker processes, the API over HTTP.

Services: DATABASE_URL / REDIS_URL when set; else the servers on 127.0.0.1:5432 / :6379 when they
answer; else the project's own embedded stack (PostgreSQL and redis-server from the wheels), so the
suite passes on a machine with none of them. Each test session gets its own fresh database, made
by the Alembic migrations, and its own Redis database number.

The farm's components run in a directory of decoy ``core/``, ``api/``, ``kernels/``, ``tuner/`` and
``worker/`` packages that raise on import: every end-to-end test fails if a component imports from
its working directory instead of the installed package.

The suite leaves nothing behind (issue 21.4): every process it starts inherits KERNELFARM_TEST_RUN=<run
id> (checked at the end: a survivor fails the run and is stopped), the databases it creates are
dropped, its Redis databases are claimed empty and emptied, and its temporary folder (embedded
PostgreSQL data dirs: ~250 MB) is removed. Only this run's own processes, databases and keys are
touched: other checkouts run tests on the same machine at the same time.

`make test` runs the files in pytest-xdist workers (``-n 3 --dist loadfile``): each worker is a test
session of its own here (its database, its Redis database, its folder inside the run's), and the
controller, which runs no test, checks for survivors once every worker has exited.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import create_engine, delete, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from kernelfarm import launcher
from kernelfarm.core.db import session_scope
from kernelfarm.core.gpu import queue_for
from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.core.migrate import upgrade
from kernelfarm.core.models import GpuWorker, Job, Trial
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store import trials as trial_store
from kernelfarm.core.store import workers as worker_store
from kernelfarm.core.store.kernels import ensure_kernel
from kernelfarm.core.store.tokens import create_token
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.services import EmbeddedPostgres, EmbeddedRedis, free_port, port_open, wait_for
from kernelfarm.stack import ProcessInfo, alive, api_ready, signal_group, spawn, stop_processes
from kernelfarm.testing.clocks import FAST_TIMINGS as HARNESS_TIMINGS
from kernelfarm.testing.decoys import write_decoy_packages

# CONVOLUTION, PNPOLY, RTX3090 and wait_for are re-exported for the test modules (`X as X`).
from kernelfarm.testing.recordings import CONVOLUTION as CONVOLUTION
from kernelfarm.testing.recordings import PNPOLY as PNPOLY
from kernelfarm.testing.recordings import RTX3090 as RTX3090

__all__ = ["CONVOLUTION", "PNPOLY", "RTX3090", "wait_for"]

# This run's tag: inherited by every process the suite starts (components, CLI runs, servers).
RUN_ID = os.environ.setdefault("KERNELFARM_TEST_RUN", f"{os.getpid()}-{secrets.token_hex(4)}")
RUN_TAG = f"KERNELFARM_TEST_RUN={RUN_ID}".encode()
RUN_FOLDER = f"kf-test-{RUN_ID}"  # the run's temporary folder, in the temp dir (pytest-xdist workers' inside it)
CREATED_DATABASES: list[tuple[str, str]] = []  # (server url, name) of every database this run made


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """The run's temporary files go in a folder of its own (removed at the end), reachable by the user
    the embedded PostgreSQL runs as when the suite runs as root (pytest's default /tmp/pytest-of-root
    is closed to it, and the suite must not change the permissions of folders it did not create)."""
    if config.option.basetemp is None and os.environ.get("KERNELFARM_TEST_RUN") == RUN_ID:
        config.option.basetemp = str(Path(tempfile.gettempdir()) / RUN_FOLDER)
        config.stash[_OWN_BASETEMP] = Path(config.option.basetemp)


_OWN_BASETEMP = pytest.StashKey[Path]()


@pytest.fixture(scope="session", autouse=True)
def _traversable_basetemp(tmp_path_factory: pytest.TempPathFactory) -> None:
    basetemp = tmp_path_factory.getbasetemp()
    basetemp.chmod(0o711)  # this run's own folder: others may pass, not list
    if basetemp.parent.name == RUN_FOLDER:  # a pytest-xdist worker's folder, inside the run's own
        basetemp.parent.chmod(0o711)


@pytest.fixture(scope="session", autouse=True)
def _children_temp_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The processes the tests start (workers, coordinators, their pools) keep their temporary files in
    this run's folder, removed at the end: a process a test kills with SIGKILL cannot clean up after
    itself, and multiprocessing left an empty ``pymp-*`` folder in /tmp for each one. PyTorch's inductor
    cache goes there too: the model profiler's tests left an empty /tmp/torchinductor_<user> (torch makes
    it from tempfile's directory, read once, before this fixture; this variable it reads on each use)."""
    folder = tmp_path_factory.mktemp("children-tmp")
    folder.chmod(0o1777)  # like /tmp: a measuring child that dropped to another uid writes there too
    overrides = {"TMPDIR": str(folder), "TORCHINDUCTOR_CACHE_DIR": str(folder / "torchinductor")}
    previous = {name: os.environ.get(name) for name in overrides}
    os.environ.update(overrides)
    yield
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    shutil.rmtree(folder, ignore_errors=True)


def tagged_processes() -> list[int]:
    """Pids of live processes carrying this run's tag (not this pytest process itself)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                tagged = RUN_TAG in handle.read().split(b"\0")
            with open(f"/proc/{name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[-1].split()
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                command = handle.read()
        except OSError:
            continue
        parent = int(fields[1])
        # The test process's own multiprocessing resource tracker (started by a process pool a test used,
        # e.g. joblib's) lives exactly as long as this process and exits with it: not a survivor.
        own_tracker = parent == os.getpid() and b"multiprocessing.resource_tracker" in command
        # stack.alive, not the main thread's state: a process whose main thread has exited is still
        # there while its other threads run or exit (and hold its sockets open)
        if tagged and not own_tracker and alive(int(name)):
            found.append(int(name))
    return found


@pytest.hookimpl(trylast=True)  # after pytest-xdist's own, which stops its workers (they carry the tag)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a process it started survived (then stop them), drop the databases its tests
    made, and remove its temp folder. Under pytest-xdist each worker drops its own databases and the
    controller, which runs no test, looks for survivors once every worker has exited."""
    if os.environ.get("KERNELFARM_TEST_RUN") != RUN_ID:
        return
    if hasattr(session.config, "workerinput"):
        _drop_all_created_databases()
        return
    deadline = time.monotonic() + 10  # components stopped a moment ago may still be exiting
    survivors = tagged_processes()
    while survivors and time.monotonic() < deadline:
        time.sleep(0.5)
        survivors = tagged_processes()
    if survivors:
        described = []
        for pid in survivors:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    command = handle.read().replace(b"\0", b" ")[:120].decode(errors="replace")
                os.kill(pid, signal.SIGKILL)
            except OSError:
                continue
            described.append(f"{pid}: {command}")
        session.config.get_terminal_writer().line(
            "LEAK: processes started by this test run survived it (killed now):\n  " + "\n  ".join(described), red=True
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    _drop_all_created_databases()
    own = session.config.stash.get(_OWN_BASETEMP, None)
    if own is not None and not os.environ.get("KERNELFARM_KEEP_TEST_TMP"):
        shutil.rmtree(own, ignore_errors=True)


def _drop_all_created_databases() -> None:
    """The databases this process's tests made outside the database_url fixture."""
    for server_url in {server for server, _ in CREATED_DATABASES}:
        # An embedded server already stopped: its data dir goes with the temp folder.
        with contextlib.suppress(Exception):
            drop_created_databases(server_url)


# The harness's fast clocks, except that the shared farm re-sends a queued trial after 8 s (the
# fault-injection harness after 6 s).
FAST_TIMINGS = {**HARNESS_TIMINGS, "KERNELFARM_REDISPATCH_AFTER_SECONDS": "8"}


@dataclass(frozen=True)
class Services:
    server_url: str  # postgres server (maintenance database)
    redis_base: str  # redis://host:port


@pytest.fixture(scope="session")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    embedded: list[object] = []
    database = os.environ.get("DATABASE_URL")
    if not database:
        if port_open("127.0.0.1", 5432):
            database = "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres"
        else:
            postgres = EmbeddedPostgres(tmp_path_factory.mktemp("pg"))
            postgres.start()
            embedded.append(postgres)
            database = postgres.url
    broker = os.environ.get("REDIS_URL")
    if not broker:
        if port_open("127.0.0.1", 6379):
            broker = "redis://127.0.0.1:6379/0"
        else:
            server = EmbeddedRedis(tmp_path_factory.mktemp("redis"))
            server.start()
            embedded.append(server)
            broker = server.url
    redis_base = broker.rsplit("/", 1)[0] if broker.count("/") > 2 else broker
    yield Services(database, redis_base)
    for item in embedded:
        if isinstance(item, EmbeddedPostgres):
            item.stop("immediate")
        elif isinstance(item, EmbeddedRedis) and item.pid:
            os.kill(item.pid, 15)


def fresh_database(server_url: str) -> str:
    """A new empty database, dropped at the end of the session (drop_created_databases)."""
    name = f"kf_test_{secrets.token_hex(4)}"
    engine = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    CREATED_DATABASES.append((server_url, name))
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


def migrated_database(server_url: str) -> str:
    """A new database with the farm's schema, dropped at the end of the session: for tests whose admin
    token may touch rows it did not create (the fuzzers revoke tokens by guessing their ids)."""
    url = fresh_database(server_url)
    upgrade(url)
    return url


def drop_created_databases(server_url: str) -> None:
    """Drop the databases this run created on ``server_url`` (and only those)."""
    from kernelfarm.core.db import dispose_engines

    dispose_engines()  # this process's pooled connections
    engine = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        for server, name in [item for item in CREATED_DATABASES if item[0] == server_url]:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            CREATED_DATABASES.remove((server, name))
    engine.dispose()


@pytest.fixture(scope="session")
def database_url(services: Services) -> Iterator[str]:
    url = fresh_database(services.server_url)
    upgrade(url)
    os.environ["DATABASE_URL"] = url  # the in-process store calls (core.db) use it too
    from kernelfarm.core.settings import get_settings

    get_settings.cache_clear()
    yield url
    drop_created_databases(services.server_url)


def raised(call: Callable[[], object]) -> BaseException:
    """What ``call`` raised (a test fails when it raises nothing)."""
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("it did not raise")


@contextlib.contextmanager
def served_gpu_model(database_url: str, prefix: str) -> Iterator[str]:
    """A GPU model of one test alone, with a live worker row (a coordinator step without one only waits);
    its jobs, their trials and the worker row are deleted after."""
    model = f"{prefix}-{secrets.token_hex(4)}"
    identity = worker_store.WorkerIdentity(name=f"{model}@test", hostname="test", backend="replay", gpu_model=model,
                                           gpu_name=model, queue=queue_for(model))  # fmt: skip
    with session_scope(database_url) as session:
        worker_store.register_worker(session, identity)
    try:
        yield model
    finally:
        with session_scope(database_url) as session:
            jobs = select(Job.id).where(Job.gpu_model == model).scalar_subquery()
            session.execute(delete(Trial).where(Trial.job_id.in_(jobs)))
            session.execute(delete(Job).where(Job.gpu_model == model))
            session.execute(delete(GpuWorker).where(GpuWorker.gpu_model == model))


def store_job(session: Session, kernel_name: str, gpu_model: str, **fields: Any) -> Job:
    """A job of ``kernel_name`` (its default problem) on the real schema, for tests that drive the
    store directly: a random search of 10 trials, no profiling, no warm start; ``fields`` override
    any NewJob field."""
    spec = get_kernel(kernel_name)
    kernel = ensure_kernel(session, spec)
    defaults: dict[str, Any] = dict(
        kernel_id=kernel.id, kernel_name=spec.name, problem=dict(spec.default_problem),
        problem_key=spec.problem_key(dict(spec.default_problem)), gpu_model=gpu_model, space={},
        strategy="random", strategy_options={}, seed=1, budget_trials=10, budget_seconds=None, parallelism=2,
        profile="none", profile_top_k=5, warm_start=False, owner="test",
    )  # fmt: skip
    return job_store.create_job(session, job_store.NewJob(**(defaults | fields)))


def measure_trials(database_url: str, trial_ids: list[int], time_ms: float = 1.0) -> None:
    """Each trial claimed by a test worker and recorded as measured in ``time_ms``, verified: what a
    worker's result would store, for tests that drive the store and the coordinator without one."""
    for trial_id in trial_ids:
        with session_scope(database_url) as session:
            claim = trial_store.claim(session, trial_id, "test-worker", None)
            assert claim is not None
        with session_scope(database_url) as session:
            result = Measurement(timing=TimingStats.from_times([time_ms]), verified=True)
            assert trial_store.record_result(session, trial_id, claim.attempt, result)


REDIS_CLAIM_KEY = "kernelfarm-test:claimed-by"
REDIS_CLAIM_SECONDS = 86400


def claim_redis_database(redis_base: str) -> str:
    """The URL of a Redis database that only this caller uses until ``release_redis_database``.

    Test sessions of several checkouts share one Redis server: a database shared by two sessions
    lets one session's coordinator consume the other's messages (its jobs then stall), and flushing
    it drops the other's. A database is claimed with SET NX, and kept only if it held nothing else;
    the claim expires after a day should the session die. Database 0 is left to everything else.
    """
    for db in range(1, 16):
        url = f"{redis_base}/{db}"
        client = redis.Redis.from_url(url)
        if client.set(REDIS_CLAIM_KEY, _claimant(), nx=True, ex=REDIS_CLAIM_SECONDS):
            if client.dbsize() == 1:
                return url
            client.delete(REDIS_CLAIM_KEY)  # someone else's data is there
    raise RuntimeError(f"no free Redis database on {redis_base}: every one from 1 to 15 is claimed or in use")


def empty_redis_database(url: str) -> None:
    """Drop every message in a claimed database but keep the claim (one transaction: no other session
    can claim it in between)."""
    with redis.Redis.from_url(url).pipeline(transaction=True) as pipe:
        pipe.flushdb()
        pipe.set(REDIS_CLAIM_KEY, _claimant(), ex=REDIS_CLAIM_SECONDS)
        pipe.execute()


def _claimant() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def release_redis_database(url: str) -> None:
    """Drop what the claimant left in its database (it held nothing else), the claim included."""
    redis.Redis.from_url(url).flushdb()


@pytest.fixture(scope="session")
def redis_url(services: Services) -> Iterator[str]:
    url = claim_redis_database(services.redis_base)
    os.environ["REDIS_URL"] = url
    yield url
    release_redis_database(url)


@dataclass
class Farm:
    """API + coordinator + workers as real processes against the test database and broker, each
    started in ``directory``/decoys (see the module docstring)."""

    database_url: str
    redis_url: str
    directory: Path
    api_url: str = ""
    processes: list[ProcessInfo] = field(default_factory=list)
    workdir: Path = field(init=False)  # the components' working directory, full of decoys

    def __post_init__(self) -> None:
        self.workdir = write_decoy_packages(self.directory / "decoys")

    def env(self, **extra: str) -> dict[str, str]:
        return launcher.component_env(self.database_url, self.redis_url, overrides={**FAST_TIMINGS, **extra})

    def start(self, name: str, argv: list[str], **env: str) -> ProcessInfo:
        info = spawn(name, argv, self.env(**env), self.directory / "logs", cwd=self.workdir)
        self.processes.append(info)
        return info

    def start_api(self) -> None:
        port = free_port()
        self.api_url = f"http://127.0.0.1:{port}"
        self.start("api", launcher.api_argv(port))
        wait_for(lambda: self.check_running() and api_ready(self.api_url), 30, "API")

    def check_running(self) -> bool:
        """True while every component started here runs; raises with the log of one that exited
        (e.g. it imported a decoy: say why now, not after a timeout)."""
        for info in self.processes:
            if not alive(info.pid):
                raise RuntimeError(f"{info.name} exited:\n{self.log(info.name)[-3000:]}")
        return True

    def start_coordinator(self, name: str = "coordinator") -> ProcessInfo:
        return self.start(name, launcher.coordinator_argv(self.directory / f"{name}-schedule"))

    def start_worker(self, name: str, *landscapes: Path, sleep_ms: float = 0.0) -> ProcessInfo:
        argv = launcher.worker_argv(name, landscapes=landscapes or (CONVOLUTION, PNPOLY), sleep_ms=sleep_ms)
        return self.start(name, argv)

    def stop(self, info: ProcessInfo, sig: int = 15) -> None:
        signal_group(info.pid, sig)
        wait_for(lambda: not alive(info.pid), 20, f"{info.name} to stop")
        self.processes.remove(info)  # stopped on purpose: check_running no longer expects it

    def stop_all(self) -> None:
        stop_processes(self.processes, grace=15)

    def log(self, name: str) -> str:
        path = self.directory / "logs" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def make_token(database_url: str, *scopes: str, name: str = "test") -> str:
    with session_scope(database_url) as session:
        return create_token(session, name, list(scopes))


def live_worker_count(database_url: str, model: str | None = None) -> int:
    from kernelfarm.core.store.workers import live_workers

    with session_scope(database_url) as session:
        return len(live_workers(session, 4.0, model))


@pytest.fixture(scope="module")
def farm(database_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    """A running farm: API, coordinator and two replay workers of the RTX 3090 recordings."""
    farm = Farm(database_url, redis_url, tmp_path_factory.mktemp("farm"))
    try:
        farm.start_api()
        farm.start_coordinator()
        farm.start_worker("replay-a")
        farm.start_worker("replay-b")
        wait_for(lambda: farm.check_running() and live_worker_count(database_url, RTX3090) >= 2, 60, "two live workers")
        yield farm
    finally:
        farm.stop_all()
        _reset_between_farms(database_url, redis_url)


def _reset_between_farms(database_url: str, redis_url: str) -> None:
    """Cancel what a module left unfinished and drop queued messages, so the next module's farm
    starts from a quiet database and broker (its housekeeping would otherwise resume old jobs)."""
    from sqlalchemy import select

    from kernelfarm.core.models import Job
    from kernelfarm.core.store.jobs import cancel_job

    with session_scope(database_url) as session:
        unfinished = session.execute(select(Job.id).where(Job.state.in_(["queued", "running"]))).scalars().all()
        for job_id in unfinished:
            cancel_job(session, job_id)
    empty_redis_database(redis_url)


@pytest.fixture(scope="module")
def admin_token(database_url: str) -> str:
    return make_token(database_url, "admin", name="test-admin")
