"""An API process of its own (no coordinator, no workers) for the HTTP-level tests of tests/api:
what the API accepts, refuses and answers does not need a farm behind it. Jobs these tests create
are cancelled at the end, so no later farm of the session picks them up."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import select

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import Job
from kernelfarm.core.store.jobs import cancel_job
from tests.conftest import Farm, make_token


@pytest.fixture(scope="module")
def api_only(database_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    farm = Farm(database_url, redis_url, tmp_path_factory.mktemp("api-only"))
    try:
        farm.start_api()
        yield farm
    finally:
        farm.stop_all()
        with session_scope(database_url) as session:
            unfinished = session.execute(select(Job.id).where(Job.state.in_(["queued", "running"]))).scalars().all()
            for job_id in unfinished:
                cancel_job(session, job_id)


def client_for(farm: Farm, token: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=farm.api_url, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def submit_token(database_url: str) -> str:
    return make_token(database_url, "submit", name="api-submitter")
