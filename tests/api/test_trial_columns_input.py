"""The job page's two first-view answers, /v1/jobs/{id}/trial-columns?limit= and /v1/jobs/{id}/convergence,
over HTTP to a real API process: a token is required, a bad limit or id is a 422 with a reason (never a
500), and an unknown job is a 404."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.api.conftest import client_for
from tests.conftest import RTX3090, Farm, make_token


@pytest.fixture(scope="module")
def job_id(api_only: Farm, submit_token: str) -> Iterator[str]:
    """A queued job (this API has no coordinator): enough for both answers; cancelled at the end."""
    with client_for(api_only, submit_token) as client:
        created = client.post("/v1/jobs", json={"kernel": "convolution_kernel", "gpu_model": RTX3090,
                                                "budget_trials": 2, "strategy": "random", "seed": 1})  # fmt: skip
        assert created.status_code == 201, created.text
        yield created.json()["id"]
        client.post(f"/v1/jobs/{created.json()['id']}/cancel")


@pytest.fixture(scope="module")
def read_token(database_url: str) -> str:
    return make_token(database_url, "read", name="columns-reader")


@pytest.mark.parametrize("path", ["trial-columns", "trial-columns?limit=5", "convergence"])
def test_a_token_is_required(api_only: Farm, job_id: str, path: str) -> None:
    with client_for(api_only, None) as client:
        assert client.get(f"/v1/jobs/{job_id}/{path}").status_code == 401
    with client_for(api_only, "kf_not-a-token") as client:
        assert client.get(f"/v1/jobs/{job_id}/{path}").status_code == 401


def test_a_read_token_gets_both(api_only: Farm, job_id: str, read_token: str) -> None:
    with client_for(api_only, read_token) as client:
        columns = client.get(f"/v1/jobs/{job_id}/trial-columns?limit=100000")
        assert columns.status_code == 200 and columns.json()["count"] == 0, columns.text
        curve = client.get(f"/v1/jobs/{job_id}/convergence")
        assert curve.status_code == 200 and curve.json()["evaluations"] == [], curve.text


@pytest.mark.parametrize("limit", ["100001", "-1", "0", "abc", "%00", "1%00", "1.5", "", "99999999999999999999999"])
def test_a_bad_limit_is_422_with_a_reason(api_only: Farm, job_id: str, read_token: str, limit: str) -> None:
    with client_for(api_only, read_token) as client:
        answer = client.get(f"/v1/jobs/{job_id}/trial-columns?limit={limit}")
    assert answer.status_code == 422, (limit, answer.status_code, answer.text[:300])
    detail = answer.json()["detail"]
    assert any("limit" in (d.get("loc") or []) for d in detail), detail


@pytest.mark.parametrize("path", ["trial-columns", "trial-columns?limit=5", "convergence"])
def test_an_unknown_job_is_404_and_a_bad_id_422(api_only: Farm, read_token: str, path: str) -> None:
    with client_for(api_only, read_token) as client:
        assert client.get(f"/v1/jobs/{uuid.uuid4()}/{path}").status_code == 404
        for bad in ("abc", "%00", f"{uuid.uuid4()}%00"):
            answer = client.get(f"/v1/jobs/{bad}/{path}")
            assert answer.status_code == 422, (bad, answer.status_code, answer.text[:300])
