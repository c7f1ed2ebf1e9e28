"""Keys longer than their columns (core/key_lengths.py), over HTTP to an API process and a real PostgreSQL.

A manifest with 14 more problem parameters of 64-character names up to 2**31 was accepted, and every job
of it was a 500 (``value too long for type character varying(512)`` inserting jobs.problem_key); one with a
tune value of 1100 characters was accepted, and so were its jobs, which failed at their coordinator's
steps. Uploads are refused now (tests/kernels/test_key_lengths.py has the bound), and a job of a version
stored before they were is a 422 with the reason. Keys that just fit are stored.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from kernelfarm.core.db import session_scope
from kernelfarm.core.key_lengths import CONFIG_KEY_BYTES, CONFIG_KEY_LENGTH, PROBLEM_KEY_LENGTH
from kernelfarm.core.models import Job
from kernelfarm.core.store import trials as trial_store
from tests.api.conftest import client_for
from tests.conftest import Farm, make_token
from tests.kernels.manifests import (
    longest_config,
    longest_problem,
    user_manifest,
    user_uploads,
    with_config_key_of,
    with_problem_key_of,
    with_problem_params,
)
from tests.stored_versions import fresh_kernel_name, store_unchecked

# A GPU model no test's worker serves: a job of a cuda-only upload on a model whose live workers all replay
# is refused for that (other test files of the same database start replay workers of real models).
GPU = "key-lengths-test-gpu"
# The probe's manifest: 14 more problem parameters, each of a 64-character name and up to 2**31.
PROBE_PROBLEM = [64] * 14


def small_manifest(name: str) -> dict[str, Any]:
    """The user kernel under ``name``, its problem within 4096 x 4096: its longest problem fits a GPU."""
    manifest = {**user_manifest(), "name": name}
    for dimension in ("M", "N"):
        manifest["problem"][dimension] = {**manifest["problem"][dimension], "maximum": 4096}
    return manifest


def upload(http: httpx.Client, manifest: dict[str, Any]) -> httpx.Response:
    parts = [("manifest", ("axpb.json", json.dumps(manifest).encode())),
             *(("files", (name, data)) for name, data in user_uploads().items())]  # fmt: skip
    return http.post("/v1/kernels", files=parts)


def submit(http: httpx.Client, kernel: str, **fields: Any) -> httpx.Response:
    return http.post("/v1/jobs", json={"kernel": kernel, "gpu_model": GPU, "budget_trials": 2, "profile": "none",
                                       **fields})  # fmt: skip


@pytest.fixture(scope="module")
def http(api_only: Farm, database_url: str) -> Iterator[httpx.Client]:
    with client_for(api_only, make_token(database_url, "kernels", "submit", name="keys-user")) as client:
        yield client


def test_the_probes_manifest_is_refused_at_upload(http: httpx.Client, database_url: str) -> None:
    with fresh_kernel_name(database_url, "keys") as name:
        refused = upload(http, with_problem_params(small_manifest(name), PROBE_PROBLEM))
        assert refused.status_code == 422, refused.text
        detail = refused.json()["detail"]
        assert detail.startswith("manifest.problem: a problem's key"), detail
        assert f"more than the {PROBLEM_KEY_LENGTH}" in detail, detail


def test_a_job_of_a_stored_version_whose_problem_key_is_too_long_is_a_422(
    http: httpx.Client, database_url: str
) -> None:
    with fresh_kernel_name(database_url, "keys") as name:
        store_unchecked(database_url, with_problem_params(small_manifest(name), PROBE_PROBLEM))
        for _ in range(2):
            refused = submit(http, name)
            assert refused.status_code == 422, refused.text  # was a 500, each time
            detail = refused.json()["detail"]
            assert detail.startswith("problem: its key") and f"more than the {PROBLEM_KEY_LENGTH}" in detail, detail


def test_a_job_of_a_stored_version_whose_config_key_is_too_long_is_a_422_unless_its_space_leaves_it_out(
    http: httpx.Client, database_url: str
) -> None:
    with fresh_kernel_name(database_url, "keys") as name:
        manifest = small_manifest(name)
        manifest["tune_params"]["variant"] = ["v" * 1100, "w"]
        store_unchecked(database_url, manifest)
        refused = submit(http, name)
        assert refused.status_code == 422, refused.text  # was a 201, and the job failed at its steps
        detail = refused.json()["detail"]
        assert f"more than the {CONFIG_KEY_LENGTH} a trial stores" in detail and "'variant'" in detail, detail
        accepted = submit(http, name, space={"parameters": {"variant": ["w"]}})
        assert accepted.status_code == 201, accepted.text


def test_the_longest_keys_that_fit_are_stored(http: httpx.Client, database_url: str) -> None:
    """An upload whose longest problem key and config key are as long as their columns: accepted, its job
    of its longest problem too, and a trial of its longest config stores."""
    with fresh_kernel_name(database_url, "keys") as name:
        manifest = with_config_key_of(with_problem_key_of(small_manifest(name), PROBLEM_KEY_LENGTH), CONFIG_KEY_LENGTH)
        uploaded = upload(http, manifest)
        assert uploaded.status_code == 201, uploaded.text
        created = submit(http, name, problem=longest_problem(manifest))
        assert created.status_code == 201, created.text
        config = longest_config(manifest)
        key = ",".join(str(value) for value in config.values())
        with session_scope(database_url) as session:
            job = session.get_one(Job, created.json()["id"])
            assert len(job.problem_key) == PROBLEM_KEY_LENGTH
            [trial] = trial_store.add_trials(session, job, [(key, config)])
            assert len(trial.config_key) == CONFIG_KEY_LENGTH


def test_a_config_key_of_the_most_bytes_allowed_is_stored(http: httpx.Client, database_url: str) -> None:
    """CONFIG_KEY_BYTES of UTF-8 that does not compress (PostgreSQL compresses an index entry before it
    checks its size) fit the index of a trial's job and config key."""
    with fresh_kernel_name(database_url, "keys") as name:
        manifest = small_manifest(name)
        assert upload(http, manifest).status_code == 201
        created = submit(http, name)
        assert created.status_code == 201, created.text
        rng = random.Random(7)
        key = "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(CONFIG_KEY_BYTES // 3))
        key += "a" * (CONFIG_KEY_BYTES - len(key.encode()))
        with session_scope(database_url) as session:
            job = session.get_one(Job, created.json()["id"])
            [trial] = trial_store.add_trials(session, job, [(key, {"variant": key})])
            assert len(trial.config_key.encode()) == CONFIG_KEY_BYTES
