"""Fixtures for the fault-injection suite: a farm on servers the suite owns (so restarting or
flushing them touches nothing else on the machine), and helpers to make jobs and trials directly."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from kernelfarm.core.celery_app import EVALUATE_TASK, make_celery
from kernelfarm.core.db import session_scope
from kernelfarm.core.gpu import queue_for
from kernelfarm.core.settings import Settings
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store import trials as trial_store
from kernelfarm.core.store.kernels import ensure_kernel
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.services import wait_for
from kernelfarm.stack import ProcessInfo
from kernelfarm.testing.audit import install_audit
from kernelfarm.testing.chaos_farm import ChaosFarm
from kernelfarm.testing.decoys import write_decoy_packages
from kernelfarm.testing.recordings import CONVOLUTION, RTX3090

QUEUE = queue_for(RTX3090)

# A component's start-up is not what these tests time. On the shared 2-core machine it took from 3 s
# (quiet) to 15-21 s (load 5, three workers starting at once), and a fresh-clone CI run beside other
# sessions saw a 60 s wait that included it run out twice; so tests wait for it apart, with room to
# spare, and keep their own bounds for the behaviour they show.
STARTUP_TIMEOUT = 300.0


def ready_worker(farm: ChaosFarm, **options: Any) -> ProcessInfo:
    """``farm.start_worker(**options)``, returned once the worker has registered and consumes."""
    info = farm.start_worker(**options)
    wait_for(lambda: farm.worker_ready(info.name), STARTUP_TIMEOUT, f"worker {info.name} to start")
    return info


def ready_coordinator(farm: ChaosFarm) -> ProcessInfo:
    """``farm.start_coordinator()``, returned once its Celery worker consumes the tuner queue."""
    info = farm.start_coordinator()
    wait_for(farm.coordinator_ready, STARTUP_TIMEOUT, "the coordinator to start")
    return info


@contextmanager
def started_farm(directory: Path, **options: Any) -> Iterator[ChaosFarm]:
    """A module's own farm: its PostgreSQL and Redis started and audited; everything stopped after."""
    farm = ChaosFarm(directory, **options)
    try:
        farm.start_servers()
        install_audit(farm.database_url)
        yield farm
    finally:
        farm.stop()


@pytest.fixture(scope="module")
def own_farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosFarm]:
    directory = Path(tmp_path_factory.mktemp("own-farm"))
    # Like the shared farm, its components run among decoy packages (see tests/conftest.py).
    with started_farm(directory, cwd=write_decoy_packages(directory / "decoys")) as farm:
        yield farm


def make_job(database_url: str, configs: list[dict[str, Any]], *, budget: int | None = None,
             parallelism: int = 2) -> tuple[uuid.UUID, list[int]]:  # fmt: skip
    """A running convolution job holding ``configs`` as queued trials (no coordinator needed)."""
    spec = get_kernel("convolution_kernel")
    with session_scope(database_url) as session:
        kernel = ensure_kernel(session, spec)
        fields: dict[str, Any] = dict(
            kernel_id=kernel.id, kernel_name=spec.name, problem=dict(spec.default_problem),
            problem_key=spec.problem_key(spec.default_problem), gpu_model=RTX3090, space={},
            strategy="random", strategy_options={}, seed=1, budget_trials=budget or len(configs),
            budget_seconds=None, parallelism=parallelism, profile="none", warm_start=False, owner="reliability",
        )  # fmt: skip
        if "profile_top_k" in job_store.NewJob.__dataclass_fields__:  # added by the profiling work
            fields["profile_top_k"] = 0
        job = job_store.create_job(session, job_store.NewJob(**fields))
        job.state = "running"
        trials = trial_store.add_trials(session, job, [(spec.space.key(c), c) for c in configs])
        trial_store.mark_dispatched(session, [t.id for t in trials])
        return job.id, [t.id for t in trials]


def valid_configs(n: int, offset: int = 0) -> list[dict[str, Any]]:
    """n configs the convolution recording measured successfully (so replay completes them)."""
    from kernelfarm.core.landscape import load_landscape

    landscape = load_landscape(CONVOLUTION)
    keys = sorted(k for k, e in landscape.entries.items() if e.failure is None)
    space = get_kernel("convolution_kernel").space
    return [space.config_from_key(k) for k in keys[offset : offset + n]]


def send_evaluate(farm: ChaosFarm, trial_id: int, times: int = 1) -> None:
    app = make_celery(Settings(database_url=farm.database_url, redis_url=farm.redis_url))
    for _ in range(times):
        app.send_task(EVALUATE_TASK, args=[trial_id], queue=QUEUE)
    app.close()


def trial_rows(database_url: str, job_id: uuid.UUID) -> list[Any]:
    engine = create_engine(database_url)
    with engine.connect() as connection:
        rows = connection.execute(
            text("SELECT id, state, attempt, worker_name, failure_kind, failure_message, started_at, finished_at "
                 "FROM trials WHERE job_id = :j ORDER BY seq"), {"j": str(job_id)}
        ).all()  # fmt: skip
    engine.dispose()
    return list(rows)


def terminal_transitions(database_url: str, trial_id: int) -> int:
    engine = create_engine(database_url)
    with engine.connect() as connection:
        count = connection.execute(
            text("SELECT count(*) FROM chaos_trial_transitions WHERE trial_id = :t "
                 "AND new_state IN ('complete', 'failed')"), {"t": trial_id}
        ).scalar_one()  # fmt: skip
    engine.dispose()
    return int(count)
