"""Security headers on every answer and a read timeout for slow request bodies (issue 18, item 9),
over HTTP against a real API process."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import pytest

from tests.api.conftest import BODY_TIMEOUT, client_for
from tests.conftest import Farm


@pytest.mark.parametrize(("method", "path"), [("GET", "/health"), ("GET", "/v1/jobs"), ("POST", "/v1/jobs"),
                                              ("GET", "/v1/nowhere"), ("GET", "/openapi.json")])  # fmt: skip
def test_api_answers_carry_security_headers(api_only: Farm, submit_token: str, method: str, path: str) -> None:
    with client_for(api_only, submit_token) as client:
        answer = client.request(method, path, json={} if method == "POST" else None)
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["cache-control"] == "no-store"
    assert answer.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]


def test_html_pages_may_not_be_framed(api_only: Farm) -> None:
    with client_for(api_only, None) as client:
        page = client.get("/docs")
    assert page.headers["content-type"].startswith("text/html")
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"


def raw_request(farm: Farm, head: bytes, body_parts: list[bytes], pause: float) -> tuple[bytes, float]:
    url = urlsplit(farm.api_url)
    started = time.monotonic()
    with socket.create_connection((url.hostname, url.port), timeout=BODY_TIMEOUT + 20) as sock:
        sock.sendall(head)
        for part in body_parts:
            time.sleep(pause)
            try:
                sock.sendall(part)
            except OSError:
                break  # the server answered and closed
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer, time.monotonic() - started


def test_a_body_that_never_arrives_is_408_after_the_read_timeout(api_only: Farm, submit_token: str) -> None:
    head = (b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
            b"Authorization: Bearer " + submit_token.encode() + b"\r\n\r\n{\"kernel\"")  # fmt: skip
    answer, elapsed = raw_request(api_only, head, [], 0)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"connection: close" in answer.lower() and b"not received within" in answer
    assert BODY_TIMEOUT - 0.5 <= elapsed < BODY_TIMEOUT + 5


def test_a_trickled_body_is_408_even_while_bytes_keep_coming(api_only: Farm, submit_token: str) -> None:
    head = (b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
            b"Authorization: Bearer " + submit_token.encode() + b"\r\n\r\n")  # fmt: skip
    answer, elapsed = raw_request(api_only, head, [b" "] * 40, 0.25)  # one byte every 0.25 s: 10 s in all
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert elapsed < BODY_TIMEOUT + 5


@pytest.mark.parametrize("path", ["/health", "/ready", "/metrics", "/v1/jobs", "/v1/jobs/not-a-uuid", "/docs"])
def test_head_answers_as_get_without_the_body(api_only: Farm, submit_token: str, path: str) -> None:
    with client_for(api_only, submit_token) as client:
        got, head = client.get(path), client.head(path)
    assert head.status_code == got.status_code != 405
    assert head.headers["content-type"] == got.headers["content-type"]
    assert head.headers["x-content-type-options"] == "nosniff"
    if "content-length" in got.headers:  # /metrics and /v1/jobs may change between the two requests
        assert int(head.headers["content-length"]) > 0
    # Nothing follows the headers on the wire (a body there would be read as the next answer)
    request = (f"HEAD {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
               f"Authorization: Bearer {submit_token}\r\n\r\n").encode()  # fmt: skip
    answer, _ = raw_request(api_only, request, [], 0)
    headers, _, rest = answer.partition(b"\r\n\r\n")
    assert headers.startswith(f"HTTP/1.1 {got.status_code}".encode()) and rest == b""


def test_head_is_refused_where_get_is(api_only: Farm) -> None:
    with client_for(api_only, None) as client:
        assert client.head("/v1/jobs").status_code == client.get("/v1/jobs").status_code == 401
        cancel = "/v1/jobs/00000000-0000-0000-0000-000000000000/cancel"  # a POST-only route
        assert client.head(cancel).status_code == client.get(cancel).status_code == 405
