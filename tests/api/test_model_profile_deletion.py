"""Model profiles can be deleted by their owner or an admin, and one owner keeps at most
``max_model_profiles_per_owner`` of them (each up to 256 KiB: without a limit one submit token could
fill the database). Over HTTP to an API process of its own, with a limit of 3, and a real PostgreSQL."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from kernelfarm.core.db import session_scope
from kernelfarm.core.store import model_profiles as store
from tests.api.conftest import api_process, client_for
from tests.conftest import Farm, make_token

LIMIT = 3
PROFILE: dict[str, Any] = {"model": "deletion-model", "device_name": "NVIDIA H100 80GB HBM3", "dtype": "bfloat16",
                           "batch": 1, "seq": 128, "latency_ms": 2.0, "report": {"operators": []}}  # fmt: skip


@pytest.fixture(scope="module")
def capped_api(database_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    with api_process(database_url, redis_url, tmp_path_factory.mktemp("capped-api"),
                     KERNELFARM_MAX_MODEL_PROFILES_PER_OWNER=str(LIMIT)) as farm:  # fmt: skip
        yield farm


def _owner_token(database_url: str) -> tuple[str, str]:
    name = f"profile-owner-{uuid.uuid4().hex[:8]}"
    return name, make_token(database_url, "submit", "read", name=name)


def _stored(database_url: str, owner: str) -> int:
    with session_scope(database_url) as session:
        return store.count_profiles(session, owner)


def test_the_owner_deletes_a_profile_and_it_is_gone(capped_api: Farm, database_url: str) -> None:
    owner, token = _owner_token(database_url)
    with client_for(capped_api, token) as client:
        stored = client.post("/v1/profiles", json=PROFILE)
        assert stored.status_code == 201, stored.text
        profile_id = stored.json()["id"]
        deleted = client.delete(f"/v1/profiles/{profile_id}")
        assert deleted.status_code == 200, deleted.text
        assert deleted.json()["id"] == profile_id and deleted.json()["model"] == PROFILE["model"]
        assert client.get(f"/v1/profiles/{profile_id}").status_code == 404
        again = client.delete(f"/v1/profiles/{profile_id}")
        assert again.status_code == 404 and profile_id in again.json()["detail"]
        assert client.delete("/v1/profiles/not-a-uuid").status_code == 422
    assert _stored(database_url, owner) == 0


def test_another_owner_cannot_delete_it_and_an_admin_can(capped_api: Farm, database_url: str) -> None:
    _, token = _owner_token(database_url)
    _, stranger = _owner_token(database_url)
    reader = make_token(database_url, "read", name="profile-reader")
    admin = make_token(database_url, "admin", name="profile-admin")
    with client_for(capped_api, token) as client:
        profile_id = client.post("/v1/profiles", json=PROFILE).json()["id"]
    for other, status in ((stranger, 403), (reader, 403)):
        with client_for(capped_api, other) as client:
            refused = client.delete(f"/v1/profiles/{profile_id}")
        assert refused.status_code == status, refused.text
    with client_for(capped_api, token) as client:
        assert client.get(f"/v1/profiles/{profile_id}").status_code == 200  # still there
    with client_for(capped_api, admin) as client:
        assert client.delete(f"/v1/profiles/{profile_id}").status_code == 200


def test_an_owner_at_the_limit_is_refused_until_they_delete_one(capped_api: Farm, database_url: str) -> None:
    owner, token = _owner_token(database_url)
    with client_for(capped_api, token) as client:
        ids = [client.post("/v1/profiles", json=PROFILE).json()["id"] for _ in range(LIMIT)]
        refused = client.post("/v1/profiles", json=PROFILE)
        assert refused.status_code == 409, refused.text
        assert f"the limit is {LIMIT}" in refused.json()["detail"] and "DELETE /v1/profiles" in refused.json()["detail"]
        assert _stored(database_url, owner) == LIMIT  # nothing stored, nothing lost
        assert client.delete(f"/v1/profiles/{ids[0]}").status_code == 200
        assert client.post("/v1/profiles", json=PROFILE).status_code == 201
    assert _stored(database_url, owner) == LIMIT


def test_concurrent_uploads_do_not_pass_the_limit(capped_api: Farm, database_url: str) -> None:
    owner, token = _owner_token(database_url)

    def upload(_: int) -> int:
        with client_for(capped_api, token) as client:
            return client.post("/v1/profiles", json=PROFILE).status_code

    with ThreadPoolExecutor(max_workers=12) as pool:
        statuses = list(pool.map(upload, range(12)))
    assert sorted(statuses) == [201] * LIMIT + [409] * (12 - LIMIT)
    assert _stored(database_url, owner) == LIMIT


def test_admins_are_not_limited(capped_api: Farm, database_url: str) -> None:
    name = f"profile-admin-{uuid.uuid4().hex[:8]}"
    admin = make_token(database_url, "admin", name=name)
    with client_for(capped_api, admin) as client:
        assert [client.post("/v1/profiles", json=PROFILE).status_code for _ in range(LIMIT + 1)] == [201] * (LIMIT + 1)
    assert _stored(database_url, name) == LIMIT + 1


ROUNDS = 20
RACERS = 8


def test_concurrent_deletions_by_the_owner_report_it_deleted_once(capped_api: Farm, database_url: str) -> None:
    """Each request read the profile, then deleted it without looking at what its DELETE did: an outside
    probe sent 8 at once and got two or three 200s in 3 rounds of 10."""
    owner, token = _owner_token(database_url)
    clients = [client_for(capped_api, token) for _ in range(RACERS)]
    start = threading.Barrier(RACERS)

    def delete(client: httpx.Client, profile_id: str) -> int:
        start.wait()
        return client.delete(f"/v1/profiles/{profile_id}").status_code

    try:
        with ThreadPoolExecutor(max_workers=RACERS) as pool:
            for round_ in range(ROUNDS):
                profile_id = clients[0].post("/v1/profiles", json=PROFILE).json()["id"]
                for client in clients:  # connected before the race, so the requests arrive together
                    assert client.get("/health").status_code == 200
                statuses = list(pool.map(delete, clients, [profile_id] * RACERS))
                assert sorted(statuses) == [200] + [404] * (RACERS - 1), (round_, statuses)
    finally:
        for client in clients:
            client.close()
    assert _stored(database_url, owner) == 0
