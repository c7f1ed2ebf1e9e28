"""A kernel version stored before a check it now fails (an ``#include`` the upload check refuses since)
must not take the whole kernel listing down with it, nor a worker's refusal check: it is left out of
``GET /v1/kernels`` (logged), its own page still says why, and a worker leaves the trial to its backend,
which records it as the trial's failure. Over HTTP to an API process and a real PostgreSQL."""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Iterator

import pytest
from sqlalchemy import delete

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import Kernel, KernelVersion
from kernelfarm.core.store import kernel_versions as version_store
from kernelfarm.worker.runner import Serves
from tests.api.conftest import client_for
from tests.conftest import Farm, make_token
from tests.kernels.manifests import user_manifest, user_uploads


@contextlib.contextmanager
def stored_kernel(database_url: str, *versions_build: bool) -> Iterator[str]:
    """A kernel of versions 1, 2, ... stored as uploads of their day would have been: one that does not
    build has a source that includes a host file."""
    name = f"stale-{secrets.token_hex(4)}"
    manifest = {**user_manifest(), "name": name}
    good = {n: data.decode() for n, data in user_uploads().items()}
    stale = {**good, "axpb.cu": "#include </etc/passwd>\n" + good["axpb.cu"]}
    with session_scope(database_url) as session:
        for builds in versions_build:
            version_store.add_version(session, version_store.NewVersion(
                name=name, content_hash=secrets.token_hex(16), manifest=json.dumps(manifest),
                files=good if builds else stale, recording=None, owner="stale-owner"))  # fmt: skip
    try:
        yield name
    finally:
        with session_scope(database_url) as session:
            session.execute(delete(KernelVersion).where(KernelVersion.name == name))
            session.execute(delete(Kernel).where(Kernel.name == name))


@pytest.fixture(scope="module")
def stale_kernel(database_url: str) -> Iterator[str]:
    with stored_kernel(database_url, False) as name:
        yield name


@pytest.fixture(scope="module")
def stale_then_fixed(database_url: str) -> Iterator[str]:
    with stored_kernel(database_url, False, True) as name:
        yield name


def test_the_listing_leaves_it_out_and_its_page_says_why(api_only: Farm, database_url: str, stale_kernel: str) -> None:
    with client_for(api_only, make_token(database_url, "read", name="stale-reader")) as http:
        listed = http.get("/v1/kernels")
        assert listed.status_code == 200, listed.text
        names = {k["name"] for k in listed.json()}
        assert stale_kernel not in names and "matmul_fp32" in names
        page = http.get(f"/v1/kernels/{stale_kernel}")
    assert page.status_code == 422 and "include" in page.text, page.text


def test_the_versions_listing_leaves_out_the_version_only(
    api_only: Farm, database_url: str, stale_then_fixed: str
) -> None:
    with client_for(api_only, make_token(database_url, "read", name="stale-reader")) as http:
        listed = http.get("/v1/kernels")
        assert listed.status_code == 200 and stale_then_fixed in {k["name"] for k in listed.json()}  # v2 builds
        versions = http.get(f"/v1/kernels/{stale_then_fixed}/versions")
        assert versions.status_code == 200, versions.text
        assert [v["version"] for v in versions.json()] == [2]  # version 1 left out, not the whole list a 422
        page = http.get(f"/v1/kernels/{stale_then_fixed}", params={"version": 1})
    assert page.status_code == 422 and "include" in page.text, page.text


def test_a_worker_leaves_it_to_the_backend(stale_kernel: str) -> None:
    serves = Serves("nvidia-h100-80gb-hbm3")
    assert serves.refusal("nvidia-h100-80gb-hbm3", stale_kernel, 1, "trial 1") is None
