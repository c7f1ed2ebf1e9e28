"""The one place that reads the environment.

Every component builds its configuration from :class:`Settings`; nothing else calls ``os.environ``.
Values come from ``KERNELFARM_*`` variables, with ``DATABASE_URL`` and ``REDIS_URL`` also accepted
bare because that is what hosting platforms and docker-compose files usually set.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import platformdirs
from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from kernelfarm.core.errors import InvalidInput


def default_state_dir() -> Path:
    """The embedded stack's default home: the user's state dir ($XDG_STATE_HOME/kernelfarm, else
    ~/.local/state/kernelfarm); for root /var/lib/kernelfarm, since root's home is closed to the
    unprivileged user the embedded PostgreSQL runs as (it refuses to run as root)."""
    if os.geteuid() == 0:
        return Path("/var/lib/kernelfarm")
    return Path(platformdirs.user_state_dir("kernelfarm", appauthor=False))


# The driver kernelfarm connects to PostgreSQL with (its `psycopg2-binary` dependency). SQLAlchemy 2.1 reads a
# bare postgresql:// as psycopg 3, which kernelfarm does not install (ModuleNotFoundError: psycopg): the bare
# forms, which users and hosting platforms write (postgres:// too), are read as this one.
DATABASE_SCHEME = "postgresql+psycopg2"
_BARE_SCHEMES = ("postgresql", "postgres")
DATABASE_URL_FORM = f"{DATABASE_SCHEME}://USER:PASSWORD@HOST:5432/DATABASE"
# SQLAlchemy's grammar of a URL (sqlalchemy/engine/url.py, _parse_url), copied to refuse here what
# create_engine would refuse with a traceback, without importing SQLAlchemy (~0.1 s of every worker's start).
_SQLALCHEMY_URL = re.compile(
    r"""
        (?P<name>[\w\+]+)://
        (?:
            (?P<username>[^:/]*)
            (?::(?P<password>[^@]*))?
        @)?
        (?:
            (?:
                \[(?P<ipv6host>[^/\?]+)\] |
                (?P<ipv4host>[^/:\?]+)
            )?
            (?::(?P<port>[^/\?]*))?
        )?
        (?:/(?P<database>[^\?]*))?
        (?:\?(?P<query>.*))?
    """,
    re.X,
)


def postgresql_url(url: str) -> str:
    """``url`` as the farm connects to it: postgresql:// and postgres:// become postgresql+psycopg2://.

    Raises:
        ValueError: why ``url`` is no URL of a PostgreSQL database the farm can connect to (no part of it
            quoted: it may hold a password).
    """
    parsed = _SQLALCHEMY_URL.match(url)
    if parsed is None:
        raise ValueError(f"not a database URL (use {DATABASE_URL_FORM})")
    scheme = parsed["name"].lower()
    dialect, _, driver = scheme.partition("+")
    if dialect not in _BARE_SCHEMES:
        raise ValueError(f"kernelfarm keeps its data in PostgreSQL, not {dialect!r} (use {DATABASE_URL_FORM})")
    if driver and driver != "psycopg2":
        raise ValueError(f"kernelfarm connects with psycopg2, not {driver!r} (use {DATABASE_URL_FORM})")
    if parsed["port"] is not None and not parsed["port"].isdigit():  # "db:" too: SQLAlchemy refuses its ""
        raise ValueError(f"its port is not a number (use {DATABASE_URL_FORM})")
    return DATABASE_SCHEME + url[len(parsed["name"]) :]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KERNELFARM_", extra="ignore")

    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("KERNELFARM_DATABASE_URL", "DATABASE_URL")
    )
    redis_url: str | None = Field(default=None, validation_alias=AliasChoices("KERNELFARM_REDIS_URL", "REDIS_URL"))
    # Where the embedded stack keeps its Postgres data, Redis, logs, pids and secrets
    # (KERNELFARM_STATE_DIR). Per user, not per directory, so every command finds the running stack
    # from anywhere: see default_state_dir.
    state_dir: Path = Field(default_factory=lambda: default_state_dir())
    api_url: str = "http://127.0.0.1:8765"
    # API of the embedded stack: the foreground supervisor's components.json; /ready reports a component
    # it found crash-looping or gave up on (KERNELFARM_STACK_HEALTH_FILE, set by `kernelfarm up`).
    stack_health_file: Path | None = None
    api_token: str | None = None

    # Trial leases: a running trial whose heartbeat is older than lease_seconds is presumed dead.
    heartbeat_seconds: float = 2.0
    lease_seconds: float = 15.0
    # A trial whose worker was lost this many times while measuring it fails as "crash" (it may be
    # what kills them); trials merely claimed behind it are requeued uncharged (core/store/trials.py).
    max_attempts: int = 3
    # A worker is "live" while its heartbeat is younger than this.
    worker_ttl_seconds: float = 15.0
    # How often the coordinator's housekeeping (reaper, re-dispatch, waiting jobs) runs.
    reap_interval_seconds: float = 3.0
    # How often, between housekeeping ticks, the coordinator looks for worker processes that died
    # (their presence lock is gone) and requeues their trials at once: one query, against a whole
    # housekeeping tick. A killed worker's trials waited 1.5 s on average for the 3 s tick, holding
    # slots of their job's parallelism (docs/RELIABILITY.md). 0: housekeeping alone does it.
    presence_sweep_seconds: float = Field(default=1.0, ge=0.0)
    # Set by a supervisor that starts a component as a warm spare (core/standby.py): the file whose
    # existence promotes it, and the supervisor's pid (a spare whose supervisor is gone exits).
    standby_gate: Path | None = None
    standby_supervisor_pid: int | None = None
    # Trials kept queued beyond a job's parallelism, as a fraction of it (rounded up). A worker that
    # finishes then takes its next trial from the broker at once instead of idling through a
    # result -> tuner.advance -> dispatch -> claim round-trip (100-400 ms measured on 2 cores, see
    # docs/SCALING.md). 0 restores "queued + running <= parallelism".
    dispatch_lookahead: float = 1.0
    # A job that has had no live worker of its GPU model for this long (and no trial activity) fails
    # with the reason, instead of waiting forever for a GPU model nobody serves.
    no_worker_timeout_seconds: float = 600.0
    # A job whose coordinator step raised this many times in a row (lost connections to PostgreSQL or
    # Redis not counted) fails with the error, instead of being stepped, and failing, every tick forever.
    max_step_failures: int = Field(default=5, ge=1)
    # A queued trial not claimed for this long is sent again (its message may have been lost).
    redispatch_after_seconds: float = 30.0

    # Queued trials of the current job handed to the backend to compile ahead (0: off). Enough to
    # keep a host's compile pool (cores - 1 processes) busy on a compile-heavy kernel; the job's
    # parallelism bounds how many are queued.
    compile_ahead: int = 16
    # Trials a worker measures per task message: after the one it was sent, it claims the job's
    # next compiled queued trial while the GPU measures, so result writes and claims overlap the
    # measurement instead of idling the GPU between trials (1: one trial per message). Needs
    # compile_ahead > 0.
    measure_batch: int = 8
    # Nsight Compute profiles are taken in batches of this many trials (one ncu process each).
    profile_batch_size: int = 8
    # A profile batch a worker took and has not answered for this long is sent again (one nobody
    # took is re-sent after redispatch_after_seconds, one whose worker died at once).
    profile_redispatch_after_seconds: float = 300.0

    # Celery task time limits for one trial; the broker visibility timeout must exceed the hard one.
    trial_soft_time_limit: int = 600
    trial_hard_time_limit: int = 660
    visibility_timeout: int = 900

    # The LLM arm of strategy "bayes_llm" (tuner/strategies/llm.py): an OpenAI-compatible
    # chat-completions endpoint. Off unless base URL and model are set.
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: SecretStr | None = None
    # For the whole answer, not each read (llm.py ChatProposer): the coordinator's step waits for it.
    llm_timeout_seconds: float = Field(default=20.0, gt=0.0, le=300.0, allow_inf_nan=False)

    # Worker process (set by `kernelfarm worker`; one process per GPU).
    worker_backend: str = "replay"  # "cuda", "triton", "replay" or "fake" (worker.backend_factory.BACKEND_NAMES)
    worker_landscapes: str = ""  # replay: os.pathsep-separated Kernel Tuner cache files
    worker_sleep_ms: float = 0.0  # replay: fixed time each trial takes
    worker_time_scale: float = 0.0  # replay: plus this factor times the recorded kernel time
    worker_gpu: int = 0  # cuda: device index (after CUDA_VISIBLE_DEVICES)
    # fake: pretend a GPU of this much memory, named for it as real models are ("Fake GPU 1.0 GiB"):
    # the worker registers it and refuses problems that need more, as a GPU worker does. None: unknown.
    worker_fake_memory_bytes: int | None = Field(default=None, gt=0)
    # cuda: keep the next ncu process started and waiting (GPU memory for one more, idle CUDA
    # context); a profile batch then took 1.7-3.4 s instead of 3.2-5.1 s (H200, 1-5 kernels).
    worker_profile_standby: bool = True
    # cuda: where compiled cubins and the GPU's measured ceilings are kept, shared by a host's
    # workers (KERNELFARM_CUDA_CACHE; default: <temp dir>/kernelfarm-cuda).
    cuda_cache: Path | None = None
    # cuda: the folders NVRTC searches for the CUDA Toolkit's headers (`#include <cuda_fp16.h>`), in
    # order (KERNELFARM_CUDA_INCLUDE_DIRS, a JSON list); default: the runtime's, the compiler's and
    # CCCL's as cuda.pathfinder finds them (worker/cuda/toolkit_headers.py)
    cuda_include_dirs: list[Path] | None = None
    # Where uploaded kernels are materialized (manifest, sources, recording), by content hash; the
    # measuring child reads them from here (default: <temp dir>/kernelfarm-kernels).
    kernel_cache: Path | None = None
    # Run kernels whose uploaded manifest carries Python (host code execution). Off unless the
    # worker is started with --allow-uploaded-python; docs/SECURITY.md, "Kernel trust".
    worker_allow_uploaded_python: bool = False
    # triton: Triton's kernel and launcher cache and the GPU's measured ceilings, shared by a host's
    # workers (KERNELFARM_TRITON_CACHE; default: <temp dir>/kernelfarm-triton).
    triton_cache: Path | None = None
    # cuda: log level of the measuring child, the process that owns the GPU (KERNELFARM_CHILD_LOG).
    child_log: str = "WARNING"

    # API: how long an authenticated token is trusted without asking the database again, as long as
    # no token was revoked: every API process re-reads the revocation stamp at most this often and
    # forgets its cached tokens when it changed, so a revocation takes effect within about this time
    # (api/token_cache.py).
    token_cache_seconds: float = 10.0
    token_revocation_check_seconds: float = 0.5
    # API: best-config answers are cached per process and re-validated against the database's
    # best_versions stamps when older than this, so a new best is served at most this late (0: no
    # cache, every lookup reads the database). See api/best_cache.py.
    best_cache_seconds: float = 0.25

    # PostgreSQL client limits, so that a down or frozen server (one that accepts TCP but answers
    # nothing) is an error after a bounded time instead of a hang: connecting (libpq connect_timeout),
    # one statement (server-side statement_timeout), and waiting for a pooled connection.
    database_connect_timeout_seconds: int = 5
    database_statement_timeout_seconds: float = 30.0
    database_pool_timeout_seconds: float = 10.0
    # API: database work of the async routes (/ready, /v1/best, token checks) is abandoned after this
    # long and answered 503 with Retry-After (a frozen server never trips a server-side timeout).
    api_database_deadline_seconds: float = 5.0
    # Dashboard (/ui): the session cookie gets the Secure flag (set it when the API is served over HTTPS).
    session_cookie_secure: bool = False

    # Prometheus /metrics: scraped with any read-scope token, with this dedicated scrape token, or with no
    # token at all from these client networks (comma-separated CIDRs, e.g. "127.0.0.1/32,10.0.0.0/8";
    # empty: none). Figures read from the database are re-read at most every metrics_cache_seconds.
    metrics_token: str | None = None
    metrics_open_networks: str = ""
    metrics_cache_seconds: float = 5.0
    # Where processes of one host (API workers, coordinator) leave their metrics for /metrics to sum
    # (prometheus-client's multiprocess mode; the variable is read by prometheus-client itself too).
    prometheus_multiproc_dir: Path | None = Field(
        default=None, validation_alias=AliasChoices("PROMETHEUS_MULTIPROC_DIR", "KERNELFARM_PROMETHEUS_MULTIPROC_DIR")
    )

    # Request limits (bad input is refused, not stored).
    max_budget_trials: int = 100_000
    max_parallelism: int = 256
    max_space_size: int = 2_000_000
    # Device memory a job's problem may need (KernelSpec.device_bytes) on a GPU model whose memory no
    # worker reported (replay and fake workers, or none registered yet): 512 GiB, more than any one GPU
    # has, so only problems that fit on none are refused. Where workers of the model reported their
    # GPU's memory, the least of them is the limit instead (api/jobs_service.py).
    max_problem_bytes: int = 512 << 30
    max_request_bytes: int = 256 * 1024
    # Unfinished (queued or running) jobs one owner may have at once; admin tokens are exempt. With
    # the fair share of a GPU model's workers (tuner/coordinator.py) it keeps one owner's flood of jobs
    # from crowding everyone else out.
    max_active_jobs_per_owner: int = 20
    # Model profiles one owner may keep stored (each up to max_request_bytes of report); more is
    # refused (409) until the owner deletes some (DELETE /v1/profiles/{id}). Admin tokens are exempt.
    max_model_profiles_per_owner: int = Field(default=1000, ge=1)
    # A request body not fully received within this many seconds is answered 408 (a client that
    # trickles its body, or declares bytes it never sends, no longer holds the request open).
    request_body_timeout_seconds: float = 10.0
    # POST /v1/kernels: a manifest, its sources and a recorded Kernel Tuner cache file.
    max_kernel_upload_bytes: int = 12 * 1024 * 1024

    @field_validator("database_url")
    @classmethod
    def _a_postgresql_url(cls, value: str | None) -> str | None:
        # A bare postgresql:// is read as psycopg2's here. A URL the farm cannot use is refused where a
        # database is needed (checked_database_url), not as the settings are read: DATABASE_URL is shared
        # with other programs (a shell's sqlite:// for another project), and the commands that only talk
        # to the API (`jobs`, `ci gate`) must not fail on it.
        if not value:
            return value
        try:
            return postgresql_url(value)
        except ValueError:
            return value

    @field_validator("lease_seconds")
    @classmethod
    def _lease_longer_than_heartbeat(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("lease_seconds must be positive")
        return value

    @field_validator("metrics_open_networks")
    @classmethod
    def _networks_parse(cls, value: str) -> str:
        for part in filter(None, (p.strip() for p in value.split(","))):
            try:
                ipaddress.ip_network(part, strict=False)
            except ValueError:
                raise ValueError(f"metrics_open_networks: {part!r} is not a network like 10.0.0.0/8") from None
        return value

    def metrics_networks(self) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        return [
            ipaddress.ip_network(p.strip(), strict=False) for p in self.metrics_open_networks.split(",") if p.strip()
        ]

    @field_validator("child_log")
    @classmethod
    def _known_log_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in logging.getLevelNamesMapping():
            raise ValueError(f"child_log must be a logging level name, got {value!r}")
        return level

    def require_database_url(self) -> str:
        url = self.checked_database_url()
        if not url:
            raise RuntimeError(
                "DATABASE_URL is not set: start the embedded stack with `kernelfarm up` "
                "or point DATABASE_URL at a PostgreSQL server"
            )
        return url

    def checked_database_url(self) -> str | None:
        """``database_url`` (None or empty: not set), for a process about to connect to it.

        Raises:
            InvalidInput: it is no URL of a PostgreSQL database the farm can connect to, saying why
                and which variable holds it, without quoting it (it may hold a password).
        """
        if not self.database_url:
            return self.database_url
        try:
            return postgresql_url(self.database_url)
        except ValueError as exc:
            names = _variable_names("database_url")
            name = next((n for n in names if os.environ.get(n)), " or ".join(names))
            raise InvalidInput(f"invalid setting: {name}: {exc}") from None

    def require_redis_url(self) -> str:
        if not self.redis_url:
            raise RuntimeError(
                "REDIS_URL is not set: start the embedded stack with `kernelfarm up` "
                "or point REDIS_URL at a Redis server"
            )
        return self.redis_url


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def settings_problem(error: ValidationError) -> str:
    """What is wrong with the environment's settings, one line per variable, for a human: the
    variable's name (not the field's) and pydantic's reason; the value only where the name is not
    one of a secret's (_SECRET_WORDS), cut to 64 characters."""
    lines = []
    for problem in error.errors(include_url=False):
        field = str(problem["loc"][0]) if problem["loc"] else ""
        names = _variable_names(field)
        # The variable read: the first of its names that is set (DATABASE_URL is read where
        # KERNELFARM_DATABASE_URL is not set).
        name = next((n for n in names if n in os.environ), " or ".join(names))
        text = f"{name}: {problem['msg'].removeprefix('Value error, ')}"  # a validator's own sentence
        if not any(word in name for word in _SECRET_WORDS):
            value = str(problem.get("input", ""))
            text += f" (got {value[:64]!r}{'...' if len(value) > 64 else ''})"
        lines.append(text)
    return "; ".join(lines)


def _variable_names(location: str) -> list[str]:
    """The environment variables of the field pydantic's error locates by ``location``: its name, or for a
    field of several variables (AliasChoices) the first of them."""
    for field, info in Settings.model_fields.items():
        alias = info.validation_alias
        names = [str(a) for a in alias.choices] if isinstance(alias, AliasChoices) else []
        if location == field or location in names:
            return names or [f"KERNELFARM_{field.upper()}"]
    return [f"KERNELFARM_{location.upper()}"]


# What a process that runs user code (the measuring child; ncu and the profile target it launches)
# keeps of the environment: what the CUDA runtime, NVRTC, CuPy, Triton, Nsight Compute (its own
# NV_COMPUTE_PROFILER_* settings) and Python need to find their files, nothing else. Every other
# variable (DATABASE_URL, REDIS_URL, KERNELFARM_* with the API token, cloud credentials, ...) is dropped.
CHILD_ENVIRONMENT_NAMES = frozenset({
    "PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP", "USER", "LOGNAME", "SHELL",
    "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "XDG_CACHE_HOME",
})  # fmt: skip
CHILD_ENVIRONMENT_PREFIXES = (
    "LC_", "CUDA_", "NVIDIA_", "CUPY_", "TRITON_", "NVRTC_", "NCCL_", "NV_COMPUTE_PROFILER_",
)  # fmt: skip
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "KEY", "URL")


# Set for the child: its math libraries start no thread pools (the child does GPU work; and a
# thread started before it confines itself would make the kernel refuse its new user namespace).
CHILD_ENVIRONMENT_FIXED = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def child_environment() -> dict[str, str]:
    """The environment a process running user code gets (see CHILD_ENVIRONMENT_NAMES)."""
    out = dict(CHILD_ENVIRONMENT_FIXED)
    for name, value in os.environ.items():
        allowed = name in CHILD_ENVIRONMENT_NAMES or name.startswith(CHILD_ENVIRONMENT_PREFIXES)
        if allowed and not any(word in name.upper() for word in _SECRET_WORDS):
            out[name] = value
    return out


_environment_lock = threading.Lock()


@contextmanager
def environment_for_children() -> Iterator[None]:
    """While inside, this process's environment is :func:`child_environment`: a process started
    meanwhile (multiprocessing's spawn inherits the environment and takes no other) gets no secret.
    Restored on exit. Keep the block short: other threads of this process see the reduced
    environment meanwhile (the worker's only other threads heartbeat with URLs they already hold)."""
    with _environment_lock:
        saved = dict(os.environ)
        reduced = child_environment()
        try:
            for name in [n for n in saved if n not in reduced]:
                del os.environ[name]
            os.environ.update(reduced)
            yield
        finally:
            for name in [n for n in os.environ if n not in saved]:
                del os.environ[name]
            os.environ.update(saved)
