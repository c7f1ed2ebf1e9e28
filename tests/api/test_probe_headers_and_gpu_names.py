"""What an outside probe found over HTTP, each a 500 from a real API process: a GPU name whose lower case is
longer than itself ("İ" is "i" and a combining dot) made a model slug longer than the column; a non-ASCII
X-CSRF-Token reached hmac.compare_digest as str; a body without a Content-Type reached validation as bytes
(a 500 where they were not UTF-8, "Input should be a valid dictionary" where they were JSON)."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import httpx
import pytest

from kernelfarm.api.session import CSRF_HEADER, SESSION_COOKIE
from tests.api.conftest import client_for
from tests.api.test_input_hardening import JOB
from tests.api.test_model_profiles_probe import PROFILE
from tests.conftest import Farm

DOTTED_CAPITAL_I = "\u0130" * 70  # 70 characters, within the fields' 128; its slug has 139


def test_a_gpu_name_whose_slug_is_longer_than_the_column_is_422(api_only: Farm, submit_token: str) -> None:
    with client_for(api_only, submit_token) as client:
        job = client.post("/v1/jobs", json=JOB | {"gpu_model": DOTTED_CAPITAL_I})
        profile = client.post("/v1/profiles", json=PROFILE | {"device_name": DOTTED_CAPITAL_I})
        best = client.get("/v1/best", params={"kernel": "convolution_kernel", "gpu": DOTTED_CAPITAL_I})
    for answer in (job, profile, best):
        assert answer.status_code == 422, (answer.status_code, answer.text[:300])
        assert "139 characters; at most 128 are kept" in answer.json()["detail"], answer.text[:300]


@pytest.mark.parametrize("path", ["/ui/logout", "/v1/jobs", "/v1/profiles"])
def test_a_non_ascii_csrf_header_is_refused_not_a_500(api_only: Farm, path: str) -> None:
    with httpx.Client(base_url=api_only.api_url, timeout=30) as client:
        client.cookies.set(SESSION_COOKIE, "not-a-session")
        answer = client.post(path, json={}, headers={CSRF_HEADER.encode(): b"\xe9t\xe9"})
    assert answer.status_code == 403, (answer.status_code, answer.text[:300])
    assert "X-CSRF-Token" in answer.json()["detail"]


@pytest.mark.parametrize("payload", [b"\xff", json.dumps(JOB).encode()], ids=["not UTF-8", "JSON"])
def test_a_body_without_a_content_type_is_415_and_the_connection_stays_usable(
    api_only: Farm, submit_token: str, payload: bytes
) -> None:
    url = urlsplit(api_only.api_url)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    try:  # http.client sends Content-Length and no Content-Type
        connection.request("POST", "/v1/jobs", body=payload, headers={"Authorization": f"Bearer {submit_token}"})
        refused = connection.getresponse()
        detail = json.loads(refused.read())["detail"]
        connection.request("GET", "/health")
        after = connection.getresponse()
        after.read()
    finally:
        connection.close()
    assert refused.status == 415 and "Content-Type: application/json" in detail, (refused.status, detail)
    assert after.status == 200
