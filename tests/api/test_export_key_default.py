"""A problem stored before its kernel gained a dimension (``matmul_bias_gelu_triton``'s ``gelu``,
whose key default is ``erf``) in the exports and the offline lookup: the job's problem has no
``gelu``, yet it is the erf problem. Real PostgreSQL, the API over HTTP (tests/api/conftest.py)."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import delete

from kernelfarm.core.db import session_scope
from kernelfarm.core.exports import json_format
from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.core.models import Job
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store import trials as trial_store
from kernelfarm.core.store.kernels import ensure_kernel
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.sdk.lookup import BestConfigLookup
from tests.api.conftest import client_for
from tests.conftest import Farm, make_token

KERNEL = "matmul_bias_gelu_triton"
# As jobs stored it before ``gelu`` existed: no gelu, and the key the spec still gives the erf problem.
OLD_ERF = {"M": 4096, "N": 3072, "K": 768, "dtype": "bfloat16", "b_layout": "kn"}
TANH_SMALL = {"M": 1024, "N": 3072, "K": 768, "dtype": "bfloat16", "b_layout": "kn", "gelu": "tanh"}


def add_measured_job(database_url: str, gpu_model: str, problem: dict[str, Any], block_m: int) -> uuid.UUID:
    """A job of ``problem`` with one verified trial (config BLOCK_M=block_m) through its lifecycle."""
    spec = get_kernel(KERNEL)
    key = spec.problem_key({"gelu": "erf", **problem})  # the erf problem's key leaves gelu out
    with session_scope(database_url) as session:
        kernel = ensure_kernel(session, spec)
        job = job_store.create_job(
            session,
            job_store.NewJob(
                kernel_id=kernel.id, kernel_name=spec.name, problem=dict(problem), problem_key=key,
                gpu_model=gpu_model, space={}, strategy="random", strategy_options={}, seed=1, budget_trials=1,
                budget_seconds=None, parallelism=1, profile="none", profile_top_k=5, warm_start=False, owner="test",
            ),
        )  # fmt: skip
        job_id = job.id
        [trial] = trial_store.add_trials(session, job, [(f"BLOCK_M={block_m}", {"BLOCK_M": block_m})])
        trial_id = trial.id
    with session_scope(database_url) as session:
        claim = trial_store.claim(session, trial_id, "test-worker", None)
        assert claim is not None
    measurement = Measurement(timing=TimingStats.from_times([float(block_m) / 100]), verified=True)
    with session_scope(database_url) as session:
        assert trial_store.record_result(session, trial_id, claim.attempt, measurement)
    return job_id


@pytest.fixture(scope="module")
def stored(database_url: str) -> Iterator[str]:
    """A GPU model of this test's own with an erf job stored without ``gelu`` and a tanh job."""
    gpu = f"test-keydefault-{secrets.token_hex(4)}"
    jobs = [add_measured_job(database_url, gpu, OLD_ERF, 128), add_measured_job(database_url, gpu, TANH_SMALL, 64)]
    try:
        yield gpu
    finally:
        with session_scope(database_url) as session:  # trials go with their job
            session.execute(delete(Job).where(Job.id.in_(jobs)))


def export(api_only: Farm, database_url: str, gpu: str, **params: str) -> Any:
    with client_for(api_only, make_token(database_url, "read", name="keydefault-test")) as http:
        response = http.get("/v1/best/export", params={"kernel": KERNEL, "gpu": gpu, **params})
    assert response.status_code == 200, response.text
    return response


def test_a_gelu_filter_keeps_the_erf_problem_stored_without_gelu(
    api_only: Farm, database_url: str, stored: str
) -> None:
    erf = json_format.read(export(api_only, database_url, stored, problem="gelu=erf").text)
    assert [(e.problem, e.config) for e in erf.entries] == [({**OLD_ERF, "gelu": "erf"}, {"BLOCK_M": 128})]
    tanh = json_format.read(export(api_only, database_url, stored, problem="gelu=tanh").text)
    assert [e.config for e in tanh.entries] == [{"BLOCK_M": 64}]


def test_the_offline_lookup_finds_the_erf_problem_stored_without_gelu(
    api_only: Farm, database_url: str, stored: str
) -> None:
    pinned = json_format.read(export(api_only, database_url, stored).text)
    lookup = BestConfigLookup(KERNEL, export=pinned, gpu=stored, cache_file=None)
    default = lookup.config()  # the kernel's default problem: gelu=erf
    assert (default.match, default.source, default.config) == ("exact", "export", {"BLOCK_M": 128})
    tanh = lookup.config({"gelu": "tanh"})  # only the M=1024 tanh problem is tanh: the nearest one
    assert (tanh.match, tanh.config) == ("nearest_problem", {"BLOCK_M": 64})


def test_the_header_default_block_is_the_default_problem(api_only: Farm, database_url: str, stored: str) -> None:
    text = export(api_only, database_url, stored, format="header").text
    block = text.split("#elif", 1)[0].split("#else", 1)[0]
    # The first problem key in order is the tanh one (M=1024...): the default block must not fall back to it.
    assert "ms for M=4096,N=3072,K=768,dtype=bfloat16,b_layout=kn */" in block
    assert "#define MATMUL_BIAS_GELU_TRITON_BLOCK_M 128\n" in block
