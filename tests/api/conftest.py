"""An API process of its own (no coordinator, no workers) for the HTTP-level tests of tests/api:
what the API accepts, refuses and answers does not need a farm behind it. Jobs these tests create
are cancelled at the end, so no later farm of the session picks them up."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from kernelfarm import launcher
from kernelfarm.core.db import session_scope
from kernelfarm.core.models import Job
from kernelfarm.core.store.jobs import cancel_job
from kernelfarm.services import free_port
from kernelfarm.stack import api_ready
from tests.conftest import Farm, make_token, wait_for

BODY_TIMEOUT = 2  # KERNELFARM_REQUEST_BODY_TIMEOUT_SECONDS of the API started here


@contextlib.contextmanager
def api_process(database_url: str, redis_url: str, directory: Path, **env: str) -> Iterator[Farm]:
    """An API process on the test database with ``env`` (settings as KERNELFARM_* variables), stopped after."""
    farm = Farm(database_url, redis_url, directory)
    try:
        port = free_port()
        farm.api_url = f"http://127.0.0.1:{port}"
        farm.start("api", launcher.api_argv(port), **env)
        wait_for(lambda: farm.check_running() and api_ready(farm.api_url), 30, "API")
        yield farm
    finally:
        farm.stop_all()


@pytest.fixture(scope="module")
def api_only(database_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    try:
        with api_process(database_url, redis_url, tmp_path_factory.mktemp("api-only"),
                         KERNELFARM_REQUEST_BODY_TIMEOUT_SECONDS=str(BODY_TIMEOUT)) as farm:  # fmt: skip
            yield farm
    finally:
        with session_scope(database_url) as session:
            unfinished = session.execute(select(Job.id).where(Job.state.in_(["queued", "running"]))).scalars().all()
            for job_id in unfinished:
                cancel_job(session, job_id)


@pytest.fixture(scope="module")
def second_api(api_only: Farm) -> Iterator[Farm]:
    """Another API process on the same database (its own credential cache)."""
    other = Farm(api_only.database_url, api_only.redis_url, api_only.directory / "second")
    try:
        other.start_api()
        yield other
    finally:
        other.stop_all()


def client_for(farm: Farm, token: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=farm.api_url, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def submit_token(database_url: str) -> str:
    return make_token(database_url, "submit", name="api-submitter")
