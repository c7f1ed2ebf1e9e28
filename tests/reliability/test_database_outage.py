"""PostgreSQL down or frozen (issue 18, item 14), on servers this module owns: the API answers 503
with a reason and Retry-After (it answered a bare 500), and a frozen server (stopped with SIGSTOP:
it accepts TCP and answers nothing) makes /ready and /v1/best answer within seconds (they hung)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kernelfarm.testing.chaos_farm import ChaosFarm
from tests.conftest import RTX3090, make_token, wait_for

DEADLINE = 5.0  # Settings.api_database_deadline_seconds, the default


@pytest.fixture(scope="module")
def farm(own_farm: ChaosFarm) -> Iterator[ChaosFarm]:
    own_farm.start_api()
    yield own_farm


@pytest.fixture(scope="module")
def client(farm: ChaosFarm) -> httpx.Client:
    token = make_token(farm.database_url, "admin", name="outage")
    return httpx.Client(base_url=farm.api_url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def postgres_pids(data_dir: Path) -> list[int]:
    """The postmaster and its children (every backend, checkpointer, ...)."""
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == postmaster:
                pids.append(int(entry.name))
    return pids


def test_while_postgres_is_down_the_api_answers_503_with_retry_after(farm: ChaosFarm, client: httpx.Client) -> None:
    assert client.get("/v1/jobs").status_code == 200
    assert farm.postgres is not None
    farm.postgres.stop("immediate")
    assert not (farm.postgres.data_dir / "postmaster.pid").exists(), (
        farm.postgres.data_dir / "server.log"
    ).read_text()[-2000:]
    try:
        for method, path in (("GET", "/v1/jobs"), ("GET", "/v1/workers"), ("POST", "/v1/jobs")):
            body = (
                {"kernel": "convolution_kernel", "gpu_model": RTX3090, "budget_trials": 2} if method == "POST" else None
            )
            answer = client.request(method, path, json=body)
            assert answer.status_code == 503, (path, answer.status_code, answer.text)
            assert "database" in answer.json()["detail"]
            assert int(answer.headers["retry-after"]) > 0
        ready = client.get("/ready")
        assert ready.status_code == 503 and ready.json()["database"].startswith("unavailable")
    finally:
        farm.postgres.start()
    wait_for(lambda: client.get("/v1/jobs").status_code == 200, 30, "the API to recover")


def test_a_frozen_postgres_does_not_hang_ready_or_best(farm: ChaosFarm, client: httpx.Client) -> None:
    assert farm.postgres is not None
    params = {"kernel": "convolution_kernel", "gpu": RTX3090}
    assert client.get("/v1/best", params=params).status_code in (200, 404)  # pools and caches warm
    pids = postgres_pids(farm.postgres.data_dir)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(0.6)  # older than the caches' revalidation age: the next answers need the database
        for path, query in (("/ready", None), ("/v1/best", params)):
            started = time.monotonic()
            answer = client.get(path, params=query)
            elapsed = time.monotonic() - started
            assert answer.status_code == 503, (path, answer.text)
            assert elapsed < DEADLINE + 3, f"{path} took {elapsed:.1f} s"
            if path == "/v1/best":
                assert "database" in answer.json()["detail"] and "retry-after" in answer.headers
            else:
                assert answer.json()["database"].startswith("unavailable")
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    wait_for(lambda: client.get("/v1/best", params=params).status_code in (200, 404), 30, "the API to recover")
