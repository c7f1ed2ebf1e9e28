"""What an outside probe of the model profiles (`/v1/profiles`) found, over HTTP to a real API process
and a real PostgreSQL: listing summaries read every listed profile's whole report (a page of 500 took
the API 15 s of CPU and a gigabyte of memory per request), and a model name of white space only was
stored as a profile's title."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event

from kernelfarm.core.db import get_engine, session_scope
from kernelfarm.core.store import model_profiles as store
from tests.api.conftest import client_for
from tests.conftest import Farm, make_token

PROFILE: dict[str, Any] = {"model": "probe-model", "device_name": "NVIDIA H100 80GB HBM3", "dtype": "bfloat16",
                           "batch": 8, "seq": 512, "latency_ms": 3.5, "report": {"operators": []}}  # fmt: skip


@pytest.fixture(scope="module")
def writer(database_url: str) -> str:
    return make_token(database_url, "submit", name="profile-probe-writer")


@pytest.fixture
def statements(database_url: str) -> Iterator[list[str]]:
    """The SQL every session of this process sends to the test database while the test runs."""
    sent: list[str] = []
    engine = get_engine(database_url)

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        sent.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


def test_listing_profiles_does_not_read_their_reports(
    api_only: Farm, writer: str, database_url: str, statements: list[str]
) -> None:
    big = {"operators": [{"name": f"aten::op{i}", "self_ms": 0.5} for i in range(2000)]}
    with client_for(api_only, writer) as client:
        stored = client.post("/v1/profiles", json={**PROFILE, "report": big})
        assert stored.status_code == 201, stored.text
        listed = client.get("/v1/profiles", params={"gpu_model": "nvidia-h100-80gb-hbm3", "limit": 500})
        assert listed.status_code == 200
        summaries = {row["id"]: row for row in listed.json()}
        assert stored.json()["id"] in summaries and "report" not in summaries[stored.json()["id"]]
        # the whole report is still there for the one profile read by id
        one = client.get(f"/v1/profiles/{stored.json()['id']}")
        assert one.status_code == 200 and one.json()["report"] == big

    statements.clear()
    with session_scope(database_url) as session:
        rows = store.list_profiles(session, "nvidia-h100-80gb-hbm3", 500, 0)
        assert any(str(row.id) == stored.json()["id"] for row in rows)
    (select,) = [s for s in statements if "FROM model_profiles" in s]
    columns = select.split("FROM model_profiles")[0]
    assert "model_profiles.report" not in columns, select  # the summaries' query reads no report
    assert "model_profiles.latency_ms" in columns


@pytest.mark.parametrize("model", ["   ", "\t", " \n "])
def test_a_model_name_of_white_space_only_is_refused(api_only: Farm, writer: str, model: str) -> None:
    with client_for(api_only, writer) as client:
        before = client.get("/v1/profiles", params={"limit": 500}).json()
        answer = client.post("/v1/profiles", json={**PROFILE, "model": model})
        after = client.get("/v1/profiles", params={"limit": 500}).json()
    assert answer.status_code == 422, answer.text
    assert "model" in json.dumps(answer.json()["detail"])
    assert len(after) == len(before)  # nothing stored


def test_a_model_name_with_spaces_inside_is_kept(api_only: Farm, writer: str) -> None:
    with client_for(api_only, writer) as client:
        answer = client.post("/v1/profiles", json={**PROFILE, "model": "my model v2"})
    assert answer.status_code == 201 and answer.json()["model"] == "my model v2"
