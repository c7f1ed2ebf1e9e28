"""Ownership and scopes (issue 18, items 3 and 4), over HTTP against real API processes: a job is
changed only by its owner or an admin, admins manage tokens over the API, and a revoked token is
refused by every API process within a second."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.api.conftest import client_for
from tests.conftest import RTX3090, Farm, Services, make_token, migrated_database

JOB = {"kernel": "convolution_kernel", "gpu_model": RTX3090, "budget_trials": 4, "parallelism": 2, "seed": 1}


def test_only_the_owner_or_an_admin_cancels_a_job(api_only: Farm, database_url: str) -> None:
    alice = client_for(api_only, make_token(database_url, "submit", name="alice"))
    bob = client_for(api_only, make_token(database_url, "submit", name="bob"))
    admin = client_for(api_only, make_token(database_url, "admin", name="ops"))
    reader = client_for(api_only, make_token(database_url, "read", name="dashboard"))
    job = alice.post("/v1/jobs", json=JOB).json()
    assert job["owner"] == "alice"

    refused = bob.post(f"/v1/jobs/{job['id']}/cancel")
    assert refused.status_code == 403 and "alice" in refused.json()["detail"]
    assert reader.post(f"/v1/jobs/{job['id']}/cancel").status_code == 403
    assert alice.get(f"/v1/jobs/{job['id']}").json()["state"] == "queued"  # untouched
    # Reading is shared: every read token sees every job (docs/SECURITY.md).
    assert reader.get(f"/v1/jobs/{job['id']}").status_code == 200
    assert bob.get("/v1/jobs", params={"owner": "alice"}).json()["total"] >= 1

    assert alice.post(f"/v1/jobs/{job['id']}/cancel").json()["state"] == "cancelled"
    other = bob.post("/v1/jobs", json=JOB).json()
    assert admin.post(f"/v1/jobs/{other['id']}/cancel").json()["state"] == "cancelled"


def test_admins_manage_tokens_over_the_api(api_only: Farm, database_url: str) -> None:
    admin = client_for(api_only, make_token(database_url, "admin", name="root"))
    created = admin.post("/v1/tokens", json={"name": "ci-bot", "scopes": ["submit"]})
    assert created.status_code == 201, created.text
    token = created.json()["token"]
    ci = client_for(api_only, token)
    assert ci.post("/v1/jobs", json=JOB).json()["owner"] == "ci-bot"

    listed = admin.get("/v1/tokens").json()
    mine = [t for t in listed if t["id"] == created.json()["id"]]
    assert mine and mine[0]["scopes"] == ["submit"] and "token" not in mine[0]
    assert token not in admin.get("/v1/tokens").text  # the plaintext is shown once

    for forbidden in (ci.get("/v1/tokens"), ci.post("/v1/tokens", json={"name": "x", "scopes": ["admin"]}),
                      ci.delete(f"/v1/tokens/{created.json()['id']}")):  # fmt: skip
        assert forbidden.status_code == 403, forbidden.text
    bad = admin.post("/v1/tokens", json={"name": "x", "scopes": ["root"]})
    assert bad.status_code == 422 and "scopes" in bad.text

    revoked = admin.delete(f"/v1/tokens/{created.json()['id']}")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    again = admin.delete(f"/v1/tokens/{created.json()['id']}")
    assert again.json()["revoked_at"] == revoked.json()["revoked_at"]  # idempotent
    assert admin.delete("/v1/tokens/987654321").status_code == 404
    assert ci.get("/v1/jobs").status_code == 401


def test_a_revoked_admin_token_is_refused_by_every_api_process_within_a_second(
    api_only: Farm, second_api: Farm, database_url: str
) -> None:
    root = client_for(api_only, make_token(database_url, "admin", name="root"))
    victim = root.post("/v1/tokens", json={"name": "leaked", "scopes": ["admin"]}).json()
    processes = [client_for(api_only, victim["token"]), client_for(second_api, victim["token"])]
    for client in processes:  # both processes have the token cached now
        for _ in range(3):
            assert client.get("/v1/tokens").status_code == 200

    assert root.delete(f"/v1/tokens/{victim['id']}").status_code == 200
    revoked_at = time.monotonic()
    for client in processes:
        while (answer := client.get("/v1/tokens")).status_code == 200:
            assert time.monotonic() - revoked_at < 1.0, "the revoked token still works after 1 s"
            time.sleep(0.02)
        assert answer.status_code == 401
    assert time.monotonic() - revoked_at < 1.5


@pytest.fixture
def own_tokens_farm(services: Services, redis_url: str, tmp_path: Path) -> Iterator[Farm]:
    """An API on a database of its own: whether a token is the last admin one depends on every token
    there, and the shared database holds other tests' admin tokens."""
    farm = Farm(migrated_database(services.server_url), redis_url, tmp_path / "farm")
    try:
        farm.start_api()
        yield farm
    finally:
        farm.stop_all()


def test_the_last_admin_token_is_not_revoked_over_the_api(own_tokens_farm: Farm) -> None:
    database = own_tokens_farm.database_url
    ops = client_for(own_tokens_farm, make_token(database, "admin", name="ops"))
    ops_id = next(t["id"] for t in ops.get("/v1/tokens").json() if t["name"] == "ops")
    reader = ops.post("/v1/tokens", json={"name": "dashboard", "scopes": ["read"]}).json()
    assert ops.delete(f"/v1/tokens/{reader['id']}").status_code == 200  # not an admin token: no question

    refused = ops.delete(f"/v1/tokens/{ops_id}")
    assert refused.status_code == 409 and "last admin token" in refused.json()["detail"], refused.text
    assert ops.get("/v1/tokens").status_code == 200  # still live

    second = ops.post("/v1/tokens", json={"name": "ops-2", "scopes": ["admin"]}).json()
    successor = client_for(own_tokens_farm, second["token"])
    assert successor.delete(f"/v1/tokens/{ops_id}").status_code == 200  # handing over works
    assert successor.delete(f"/v1/tokens/{second['id']}").status_code == 409

    # Two admins revoking each other at once: one wins, the other is refused (409, or 401 once its own
    # token is gone), and the farm keeps an admin.
    for round_ in range(4):
        third = successor.post("/v1/tokens", json={"name": f"ops-{round_ + 3}", "scopes": ["admin"]}).json()
        rival = client_for(own_tokens_farm, third["token"])
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda pair: pair[0].delete(f"/v1/tokens/{pair[1]}").status_code,
                                    [(successor, third["id"]), (rival, second["id"])]))  # fmt: skip
        assert sorted(answers) in ([200, 401], [200, 409]), answers
        if answers[1] == 200:  # the rival won: it carries on as the successor
            successor, second = rival, third
        live_admins = [t for t in successor.get("/v1/tokens").json() if "admin" in t["scopes"] and not t["revoked_at"]]
        assert [t["id"] for t in live_admins] == [second["id"]]
