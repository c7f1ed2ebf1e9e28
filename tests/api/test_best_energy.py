"""/v1/best with objective=energy and objective=pareto, on the real schema with the app in-process."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from kernelfarm.api.app import create_app
from kernelfarm.core.db import session_scope
from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.core.settings import Settings
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store import trials as trial_store
from tests.api.test_best_cache import KERNEL, add_job, new_model
from tests.conftest import make_token


def record(
    database_url: str,
    job_id: uuid.UUID,
    time_ms: float,
    energy_mj: float | None,
    missing: str | None = None,
    key: str = "",
) -> int:
    key = key or secrets.token_hex(4)
    with session_scope(database_url) as session:
        [trial] = trial_store.add_trials(session, job_store.get_job(session, job_id), [(key, {"key": key})])
        trial_id = trial.id
    with session_scope(database_url) as session:
        claim = trial_store.claim(session, trial_id, "test-worker", None)
        assert claim is not None
    metrics: dict[str, Any] = {} if energy_mj is None else {"energy_mj": energy_mj, "power_w": 300.0}
    if missing is not None:
        metrics["energy_missing"] = missing
    measurement = Measurement(timing=TimingStats.from_times([time_ms]), verified=True, metrics=metrics)
    with session_scope(database_url) as session:
        assert trial_store.record_result(session, trial_id, claim.attempt, measurement)
    return trial_id


@pytest.fixture(scope="module")
def client(database_url: str) -> Iterator[TestClient]:
    settings = Settings(database_url=database_url, redis_url="redis://127.0.0.1:1/0")
    with TestClient(create_app(settings)) as test_client:
        test_client.headers["Authorization"] = f"Bearer {make_token(database_url, 'read', name='energy-test')}"
        yield test_client


def test_energy_and_the_pareto_front(client: TestClient, database_url: str) -> None:
    gpu = new_model()
    job = add_job(database_url, gpu)
    fast = record(database_url, job, 1.0, 9.0)
    middle = record(database_url, job, 2.0, 4.0)
    record(database_url, job, 3.0, 5.0)  # dominated by the middle one
    frugal = record(database_url, job, 4.0, 2.0)
    record(database_url, job, 0.5, None)  # fastest, but no energy counter: not on the front

    def best(**params: str) -> dict[str, Any]:
        response = client.get("/v1/best", params={"kernel": KERNEL, "gpu": gpu, **params})
        assert response.status_code == 200, response.text
        return response.json()

    assert best()["time_ms"] == 0.5 and best()["objective"] == "time"
    energy = best(objective="energy")
    assert energy["trial_id"] == frugal and energy["energy_mj"] == 2.0 and energy["pareto"] is None
    pareto = best(objective="pareto")
    assert [p["trial_id"] for p in pareto["pareto"]] == [fast, middle, frugal]
    assert pareto["trial_id"] == fast


def test_a_config_measured_by_two_jobs_is_one_point_of_the_front(client: TestClient, database_url: str) -> None:
    # Seen on the H100: the energy job and the time+energy job both measured a layernorm config, and
    # the front listed it twice (0.0953 ms / 60.3 mJ and 0.0955 ms / 60.0 mJ).
    gpu = new_model()
    first, second = add_job(database_url, gpu), add_job(database_url, gpu)
    fastest_reading = record(database_url, first, 1.00, 6.0, key="a")
    record(database_url, second, 1.01, 5.9, key="a")
    frugal = record(database_url, second, 2.0, 3.0, key="b")
    response = client.get("/v1/best", params={"kernel": KERNEL, "gpu": gpu, "objective": "pareto"})
    assert response.status_code == 200, response.text
    points = response.json()["pareto"]
    assert [(p["config_key"], p["trial_id"]) for p in points] == [("a", fastest_reading), ("b", frugal)]


def test_no_energy_is_a_404_with_a_reason(client: TestClient, database_url: str) -> None:
    gpu = new_model()
    record(database_url, add_job(database_url, gpu), 1.0, None)
    response = client.get("/v1/best", params={"kernel": KERNEL, "gpu": gpu, "objective": "energy"})
    assert response.status_code == 404 and "no energy measured" in response.text
    bad = client.get("/v1/best", params={"kernel": KERNEL, "gpu": gpu, "objective": "power"})
    assert bad.status_code == 422


def test_trials_the_meter_gave_up_on_are_a_404_that_says_so(client: TestClient, database_url: str) -> None:
    gpu = new_model()
    reason = "the meter gave up: no complete energy window in 4.01 s (the counter stepped 1 time(s))"
    record(database_url, add_job(database_url, gpu), 1.0, None, missing=reason)
    for objective in ("energy", "pareto"):
        response = client.get("/v1/best", params={"kernel": KERNEL, "gpu": gpu, "objective": objective})
        assert response.status_code == 404 and "no energy measured" in response.text
        assert f"recorded no energy, latest: {reason}" in response.json()["detail"]
    assert client.get("/v1/best", params={"kernel": KERNEL, "gpu": gpu}).json()["time_ms"] == 1.0
