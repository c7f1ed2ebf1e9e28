"""An export the writers refuse (core/exports/: two names C or Triton cannot keep apart) is an HTTP 422
that names both, and one line from the CLI, not a 500. Real PostgreSQL, the API over HTTP
(tests/api/conftest.py); the rows are stored as a job of a kernel could record them."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import Job
from kernelfarm.core.store import trials as trial_store
from kernelfarm.kernels.registry import get_kernel
from tests.api.conftest import client_for
from tests.cli.test_bad_arguments import kernelfarm
from tests.conftest import Farm, make_token, measure_trials, store_job

KERNEL = "matmul_bias_gelu_triton"
PROBLEM = {"M": 4096, "N": 3072, "K": 768, "dtype": "bfloat16", "b_layout": "kn", "gelu": "tanh"}


def add_best(database_url: str, gpu_model: str, problem: dict[str, Any], config: dict[str, Any]) -> uuid.UUID:
    """A job of ``problem`` with one verified trial of ``config``."""
    spec = get_kernel(KERNEL)
    with session_scope(database_url) as session:
        job = store_job(session, KERNEL, gpu_model, problem=dict(problem), problem_key=spec.problem_key(problem),
                        budget_trials=1, parallelism=1)  # fmt: skip
        job_id = job.id
        [trial] = trial_store.add_trials(session, job, [(",".join(map(str, config.values())), config)])
        trial_id = trial.id
    measure_trials(database_url, [trial_id])
    return job_id


@pytest.fixture(scope="module")
def gpus(database_url: str) -> Iterator[dict[str, str]]:
    """GPU models of this test's own: one measured on problems whose dtypes differ only in case (one
    C problem tag), one with a config whose parameters differ only in case (one Triton key), one with an
    integer no C constant holds."""
    suffix = secrets.token_hex(4)
    header_gpu, triton_gpu = f"test-refusal-header-{suffix}", f"test-refusal-triton-{suffix}"
    huge_gpu = f"test-refusal-huge-{suffix}"
    jobs = [
        add_best(database_url, header_gpu, PROBLEM, {"BLOCK_M": 64}),
        add_best(database_url, header_gpu, {**PROBLEM, "dtype": "BFLOAT16"}, {"BLOCK_M": 128}),
        add_best(database_url, triton_gpu, PROBLEM, {"BLOCK_M": 64, "block_m": 32}),
        add_best(database_url, huge_gpu, PROBLEM, {"BLOCK_M": 2**70}),  # a manifest's integers are unbounded
    ]
    try:
        yield {"header": header_gpu, "triton": triton_gpu, "huge": huge_gpu}
    finally:
        with session_scope(database_url) as session:  # trials go with their job
            session.execute(delete(Job).where(Job.id.in_(jobs)))


def export(api_only: Farm, database_url: str, gpu: str, format: str) -> tuple[int, Any]:
    with client_for(api_only, make_token(database_url, "read", name="refusal-test")) as http:
        response = http.get("/v1/best/export", params={"kernel": KERNEL, "gpu": gpu, "format": format})
    is_json = response.headers["content-type"].startswith("application/json")
    return response.status_code, response.json() if is_json else response.text


def test_problems_with_one_c_tag_are_a_422_naming_both(
    api_only: Farm, database_url: str, gpus: dict[str, str], tmp_path: Path
) -> None:
    status, body = export(api_only, database_url, gpus["header"], "header")
    assert status == 422, body
    assert "dtype=bfloat16" in body["detail"] and "dtype=BFLOAT16" in body["detail"], body
    assert export(api_only, database_url, gpus["header"], "json")[0] == 200  # the json export keeps them apart
    env = {"KERNELFARM_API_URL": api_only.api_url, "KERNELFARM_API_TOKEN": make_token(database_url, "read")}
    done = kernelfarm(tmp_path, "export", KERNEL, "-f", "header", "--gpu", gpus["header"], env=env)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr.startswith("error: cannot export 'matmul_bias_gelu_triton' as a C header: ")
    assert done.stderr.count("\n") == 1, done.stderr


def test_parameters_with_one_triton_key_are_a_422_naming_both(
    api_only: Farm, database_url: str, gpus: dict[str, str]
) -> None:
    status, body = export(api_only, database_url, gpus["triton"], "triton")
    assert status == 422, body
    assert "parameters 'BLOCK_M' and 'block_m' are both 'BLOCK_M'" in body["detail"], body


def test_an_integer_beyond_64_bits_is_a_422_for_the_header_naming_it(
    api_only: Farm, database_url: str, gpus: dict[str, str], tmp_path: Path
) -> None:
    status, body = export(api_only, database_url, gpus["huge"], "header")
    assert status == 422, body
    assert f"parameter 'BLOCK_M' is {2**70} on {gpus['huge']}" in body["detail"], body
    status, body = export(api_only, database_url, gpus["huge"], "json")
    assert (status, body["entries"][0]["config"]) == (200, {"BLOCK_M": 2**70})  # the json export keeps it
    env = {"KERNELFARM_API_URL": api_only.api_url, "KERNELFARM_API_TOKEN": make_token(database_url, "read")}
    done = kernelfarm(tmp_path, "export", KERNEL, "-f", "header", "--gpu", gpus["huge"], env=env)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr.startswith("error: cannot export 'matmul_bias_gelu_triton' as a C header: parameter 'BLOCK_M'")
    assert done.stderr.count("\n") == 1, done.stderr
