"""deploy/healthcheck.py against real components: an HTTP server, the test Postgres (schema and
worker heartbeats) and the test Redis (Celery ping)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from sqlalchemy import delete

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import GpuWorker
from kernelfarm.core.settings import get_settings
from kernelfarm.core.store import workers as worker_store
from tests.conftest import Services, fresh_database
from tests.deploy.sources import healthcheck_module
from tests.stand_in_server import stand_in_server


def run(*argv: str) -> int:
    return healthcheck_module().main(list(argv))


@pytest.fixture
def http_url() -> Iterator[str]:
    """/health answers 200, every other path 503 (tests/stand_in_server.py)."""
    answer = {"database": "unavailable"}
    with stand_in_server(lambda request: (200 if request.path == "/health" else 503, answer)) as url:
        yield url


@pytest.fixture
def fresh_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    get_settings.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    get_settings.cache_clear()


def test_http(http_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("http", f"{http_url}/health") == 0
    assert run("http", f"{http_url}/ready") == 1
    assert "503" in capsys.readouterr().err
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert run("http", f"http://127.0.0.1:{port}/health", "--timeout", "1") == 1


def test_schema_at_head(database_url: str) -> None:
    assert run("schema") == 0


def test_schema_behind_is_unhealthy(services: Services, fresh_settings: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    fresh_settings.setenv("DATABASE_URL", fresh_database(services.server_url))
    assert run("schema") == 1
    assert "kernelfarm db upgrade" in capsys.readouterr().err


def test_worker_heartbeat(database_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    name = f"hc-test@{socket.gethostname()}"
    with session_scope(database_url) as session:
        worker_store.register_worker(session, worker_store.WorkerIdentity(
            name=name, hostname=socket.gethostname(), backend="replay", gpu_model="hc-test-gpu",
            gpu_name="Test GPU", queue="gpu.hc-test-gpu"))  # fmt: skip
    try:
        assert run("worker", "--name", name) == 0
        assert run("worker") == 0  # any worker registered from this host
        with session_scope(database_url) as session:
            worker_store.stop_worker(session, name)
        assert run("worker", "--name", name) == 1
        assert "no fresh heartbeat" in capsys.readouterr().err
    finally:
        # The session database is shared with other tests that count workers: leave no trace.
        with session_scope(database_url) as session:
            session.execute(delete(GpuWorker).where(GpuWorker.name == name))


def test_celery_ping_without_a_coordinator(redis_url: str, fresh_settings: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    fresh_settings.setenv("REDIS_URL", redis_url)
    assert run("celery", "--node", "tuner@nowhere", "--timeout", "0.5") == 1
    assert "no ping reply" in capsys.readouterr().err
