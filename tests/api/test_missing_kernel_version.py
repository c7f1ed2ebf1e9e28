"""A kernel asked for at a version it does not have is a 404 saying which versions it has, for an
uploaded kernel and a catalogue kernel alike: ``GET /v1/kernels/user-axpb?version=99`` said the kernel
was unknown, and ``GET /v1/kernels/convolution_kernel?version=99`` answered version 1. Over HTTP to an
API process of its own and a real PostgreSQL."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import delete

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import Kernel, KernelVersion
from tests.api.conftest import client_for
from tests.api.test_input_hardening import JOB
from tests.conftest import Farm, make_token
from tests.kernels.manifests import user_manifest, user_uploads


@pytest.fixture(scope="module")
def http(api_only: Farm, database_url: str) -> Iterator[httpx.Client]:
    with client_for(api_only, make_token(database_url, "kernels", "submit", "read", name="version-asker")) as client:
        yield client


@pytest.fixture(scope="module")
def uploaded(http: httpx.Client, database_url: str) -> Iterator[str]:
    """An uploaded kernel at versions 1 and 2, uploaded over HTTP."""
    name = f"versioned-axpb-{secrets.token_hex(4)}"
    try:
        for scale in ("1", "2"):  # new content: the next version
            manifest = {**user_manifest(), "name": name, "description": f"axpb, take {scale}"}
            parts = [("manifest", ("axpb.json", json.dumps(manifest).encode())),
                     *(("files", (file, data)) for file, data in user_uploads().items())]  # fmt: skip
            created = http.post("/v1/kernels", files=parts)
            assert created.status_code == 201 and created.json()["version"] == int(scale), created.text
        yield name
    finally:
        with session_scope(database_url) as session:
            session.execute(delete(KernelVersion).where(KernelVersion.name == name))
            session.execute(delete(Kernel).where(Kernel.name == name))


def test_an_uploaded_kernel_without_the_version_says_which_it_has(http: httpx.Client, uploaded: str) -> None:
    missing = http.get(f"/v1/kernels/{uploaded}", params={"version": 99})
    assert missing.status_code == 404, missing.text
    assert missing.json()["detail"] == f"kernel {uploaded!r} has no version 99 (its versions: 1, 2)"
    for version in (1, 2):
        found = http.get(f"/v1/kernels/{uploaded}", params={"version": version})
        assert found.status_code == 200 and found.json()["version"] == version, found.text
    assert http.get(f"/v1/kernels/{uploaded}").json()["version"] == 2  # no version: the latest


def test_a_catalogue_kernel_without_the_version_says_which_it_has(http: httpx.Client) -> None:
    missing = http.get("/v1/kernels/convolution_kernel", params={"version": 99})
    assert missing.status_code == 404, missing.text
    assert missing.json()["detail"] == "kernel 'convolution_kernel' has no version 99 (its versions: 1)"
    found = http.get("/v1/kernels/convolution_kernel", params={"version": 1})
    assert found.status_code == 200 and found.json()["version"] == 1, found.text


def test_an_unknown_kernel_at_a_version_is_still_unknown(http: httpx.Client) -> None:
    answer = http.get("/v1/kernels/no-such-kernel", params={"version": 99})
    assert answer.status_code == 404 and "unknown kernel 'no-such-kernel'" in answer.json()["detail"], answer.text


def test_a_job_pinned_to_a_version_the_upload_lacks_is_refused_saying_so(http: httpx.Client, uploaded: str) -> None:
    answer = http.post("/v1/jobs", json={**JOB, "kernel": uploaded, "kernel_version": 99})
    assert answer.status_code == 422, answer.text
    assert f"kernel {uploaded!r} has no version 99 (its versions: 1, 2)" in answer.json()["detail"]
