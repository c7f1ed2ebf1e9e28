"""A kernel version stored before a check it now fails (an ``#include`` the upload check refuses since)
must not take the whole kernel listing down with it, nor a worker's refusal check: it is left out of
``GET /v1/kernels`` (logged), its own page still says why, and a worker leaves the trial to its backend,
which records it as the trial's failure. Over HTTP to an API process and a real PostgreSQL."""

from __future__ import annotations

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


@pytest.fixture(scope="module")
def stale_kernel(database_url: str) -> Iterator[str]:
    """A version stored as an upload of its day would have been: a source that includes a host file."""
    name = f"stale-{secrets.token_hex(4)}"
    manifest = {**user_manifest(), "name": name}
    files = {n: data.decode() for n, data in user_uploads().items()}
    files["axpb.cu"] = "#include </etc/passwd>\n" + files["axpb.cu"]
    with session_scope(database_url) as session:
        version_store.add_version(session, version_store.NewVersion(
            name=name, content_hash=secrets.token_hex(16), manifest=json.dumps(manifest), files=files,
            recording=None, owner="stale-owner"))  # fmt: skip
    try:
        yield name
    finally:
        with session_scope(database_url) as session:
            session.execute(delete(KernelVersion).where(KernelVersion.name == name))
            session.execute(delete(Kernel).where(Kernel.name == name))


def test_the_listing_leaves_it_out_and_its_page_says_why(api_only: Farm, database_url: str, stale_kernel: str) -> None:
    with client_for(api_only, make_token(database_url, "read", name="stale-reader")) as http:
        listed = http.get("/v1/kernels")
        assert listed.status_code == 200, listed.text
        names = {k["name"] for k in listed.json()}
        assert stale_kernel not in names and "matmul_fp32" in names
        page = http.get(f"/v1/kernels/{stale_kernel}")
    assert page.status_code == 422 and "include" in page.text, page.text


def test_a_worker_leaves_it_to_the_backend(stale_kernel: str) -> None:
    serves = Serves("nvidia-h100-80gb-hbm3")
    assert serves.refusal("nvidia-h100-80gb-hbm3", stale_kernel, 1, "trial 1") is None
