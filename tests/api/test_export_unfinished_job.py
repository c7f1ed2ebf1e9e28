"""A job's trial exports while none of its trials has finished (queued, or cancelled before any ran):
the ``kernel_tuner`` export is a 404 that says why, not a cache Kernel Tuner breaks when it continues
from it; ``t4`` and ``csv`` answer what there is. Then, with one trial finished, the cache is in the form
Kernel Tuner reopens for appending. Real PostgreSQL, the API over HTTP (tests/api/conftest.py)."""

from __future__ import annotations

import csv
import io
import json
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import delete

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import Job
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store import trials as trial_store
from kernelfarm.kernels.registry import get_kernel
from tests.api.conftest import client_for
from tests.api.test_export_refusals import KERNEL, PROBLEM
from tests.cli.test_bad_arguments import kernelfarm
from tests.conftest import Farm, make_token, measure_trials, store_job

CONFIGS = [{"BLOCK_M": 64}, {"BLOCK_M": 128}]


def add_queued_job(database_url: str) -> tuple[uuid.UUID, list[int]]:
    """A job with two trials, neither claimed yet."""
    spec = get_kernel(KERNEL)
    with session_scope(database_url) as session:
        job = store_job(session, KERNEL, f"test-unfinished-{secrets.token_hex(4)}", problem=dict(PROBLEM),
                        problem_key=spec.problem_key(PROBLEM), budget_trials=2, parallelism=1)  # fmt: skip
        trials = trial_store.add_trials(session, job, [(str(c["BLOCK_M"]), c) for c in CONFIGS])
        return job.id, [t.id for t in trials]


@pytest.fixture
def queued(database_url: str) -> Iterator[tuple[uuid.UUID, list[int]]]:
    job_id, trial_ids = add_queued_job(database_url)
    try:
        yield job_id, trial_ids
    finally:
        with session_scope(database_url) as session:  # trials go with their job
            session.execute(delete(Job).where(Job.id == job_id))


def export(api_only: Farm, database_url: str, job_id: uuid.UUID, format: str) -> tuple[int, str]:
    with client_for(api_only, make_token(database_url, "read", name="unfinished-test")) as http:
        response = http.get(f"/v1/jobs/{job_id}/export", params={"format": format})
    return response.status_code, response.text


@pytest.mark.parametrize("cancelled", [False, True], ids=["queued", "cancelled"])
def test_no_finished_trial_is_a_404_for_kernel_tuner_saying_why(
    api_only: Farm, database_url: str, queued: tuple[uuid.UUID, list[int]], cancelled: bool, tmp_path: Path
) -> None:
    job_id, _ = queued
    if cancelled:
        with session_scope(database_url) as session:
            job_store.cancel_job(session, job_id)
    status, body = export(api_only, database_url, job_id, "kernel_tuner")
    assert status == 404, body
    assert "none of its 2 trials has finished" in json.loads(body)["detail"], body
    status, body = export(api_only, database_url, job_id, "t4")
    assert (status, json.loads(body)["results"]) == (200, [])
    status, body = export(api_only, database_url, job_id, "csv")
    assert status == 200 and [row["config_key"] for row in csv.DictReader(io.StringIO(body))] == ["64", "128"]
    env = {"KERNELFARM_API_URL": api_only.api_url, "KERNELFARM_API_TOKEN": make_token(database_url, "read")}
    done = kernelfarm(tmp_path, "export", "--job", str(job_id), "-f", "kernel_tuner", env=env)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "none of its 2 trials has finished" in done.stderr


def test_with_a_finished_trial_the_cache_is_in_the_form_kernel_tuner_reopens(
    api_only: Farm, database_url: str, queued: tuple[uuid.UUID, list[int]]
) -> None:
    job_id, [first, _] = queued
    measure_trials(database_url, [first], time_ms=1.5)
    status, body = export(api_only, database_url, job_id, "kernel_tuner")
    assert status == 200, body
    assert list(json.loads(body)["cache"]) == ["64"]
    # Kernel Tuner (util.correct_open_cache) takes a stripped file that ends so as closed, drops those
    # three characters and appends ",": the last key must be the non-empty cache.
    assert body.strip().endswith("}\n}") and list(json.loads(body))[-1] == "cache"
