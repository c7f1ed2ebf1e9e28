"""The offline lookup (kernelfarm/sdk/lookup.py) over a ``json`` export answers what ``/v1/best`` answers
where two recorded problems, or two GPU models of the same architecture, are equally near the one asked
for: the same config, match, GPU model and problem, not the faster of the two. Real PostgreSQL, the API
over HTTP (tests/api/conftest.py); the rows are stored as a job of the kernel records them."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import delete, update

from kernelfarm.core.db import session_scope
from kernelfarm.core.exports import json_format
from kernelfarm.core.models import GpuWorker, Job, Trial
from kernelfarm.core.store import best as best_store
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.sdk.lookup import BestConfigLookup
from tests.api.conftest import client_for
from tests.api.test_export_refusals import KERNEL, PROBLEM, add_best
from tests.conftest import Farm, make_token


@dataclass(frozen=True)
class Stored:
    nearest_gpu: str  # measured on M=512 (fast) and M=2048 (slow): M=1024 is equally near both
    sibling_gpus: tuple[str, str]  # one architecture, one problem; the second is the faster
    asking_gpu: str  # of that architecture, measured on nothing
    capability: str


def add_measured(database_url: str, gpu_model: str, problem: dict[str, Any], block_m: int, time_ms: float) -> uuid.UUID:
    job_id = add_best(database_url, gpu_model, problem, {"BLOCK_M": block_m})
    with session_scope(database_url) as session:  # add_best measures 1.0 ms: make the times differ
        session.execute(
            update(Trial)
            .where(Trial.job_id == job_id)
            .values(time_ms=time_ms, time_p20_ms=time_ms, time_p80_ms=time_ms)
        )
    return job_id


@pytest.fixture(scope="module")
def stored(database_url: str) -> Iterator[Stored]:
    suffix = secrets.token_hex(4)
    # Names and problem keys whose order is the same in every collation: "M=2048" before "M=512",
    # "...-a-" before "...-b-".
    nearest_gpu = f"test-tie-nearest-{suffix}"
    siblings = (f"test-tie-a-{suffix}", f"test-tie-b-{suffix}")
    asking, capability = f"test-tie-asking-{suffix}", f"99.{int(suffix, 16) % 10000}"
    jobs = [
        add_measured(database_url, nearest_gpu, {**PROBLEM, "M": 512}, 32, 0.5),
        add_measured(database_url, nearest_gpu, {**PROBLEM, "M": 2048}, 256, 2.0),
        add_measured(database_url, siblings[0], PROBLEM, 128, 3.0),
        add_measured(database_url, siblings[1], PROBLEM, 64, 1.0),
    ]
    with session_scope(database_url) as session:  # the farm learns architectures from its workers
        session.add_all(
            GpuWorker(name=f"{model}@tie-test", hostname="tie-test", backend="replay", gpu_model=model,
                      gpu_name=model, compute_capability=capability, queue=f"gpu.{model}")
            for model in (*siblings, asking)
        )  # fmt: skip
    try:
        yield Stored(nearest_gpu, siblings, asking, capability)
    finally:
        with session_scope(database_url) as session:  # trials go with their job
            session.execute(delete(Job).where(Job.id.in_(jobs)))
            session.execute(delete(GpuWorker).where(GpuWorker.hostname == "tie-test"))


def farm_and_offline(
    api_only: Farm, database_url: str, stored: Stored, gpu: str, problem: dict[str, Any]
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """(config, match, GPU model, problem) as ``/v1/best`` answers and as the offline lookup does."""
    with client_for(api_only, make_token(database_url, "read", name="tie-test")) as http:
        pairs = [f"{name}={value}" for name, value in problem.items()]
        best = http.get("/v1/best", params={"kernel": KERNEL, "gpu": gpu, "problem": pairs})
        assert best.status_code == 200, best.text
        models = [stored.nearest_gpu, *stored.sibling_gpus]
        exported = http.get("/v1/best/export", params={"kernel": KERNEL, "gpu": models})
        assert exported.status_code == 200, exported.text
    answer = best.json()
    lookup = BestConfigLookup(KERNEL, export=json_format.read(exported.text), gpu=gpu,
                              compute_capability=stored.capability, cache_file=None)  # fmt: skip
    found = lookup.config(problem)
    assert found.source == "export"
    return (answer["config"], answer["match"], answer["matched_gpu_model"], answer["matched_problem"]), (
        found.config, found.match, found.gpu_model, found.problem,
    )  # fmt: skip


def test_equally_near_problems_give_the_farms_answer(api_only: Farm, database_url: str, stored: Stored) -> None:
    farm, offline = farm_and_offline(api_only, database_url, stored, stored.nearest_gpu, {**PROBLEM, "M": 1024})
    assert farm[:3] == ({"BLOCK_M": 256}, "nearest_problem", stored.nearest_gpu), farm  # M=2048, the slower
    assert offline == farm


def test_equally_near_gpu_models_give_the_farms_answer(api_only: Farm, database_url: str, stored: Stored) -> None:
    farm, offline = farm_and_offline(api_only, database_url, stored, stored.asking_gpu, PROBLEM)
    assert farm[:3] == ({"BLOCK_M": 128}, "same_architecture", stored.sibling_gpus[0]), farm  # the slower
    assert offline == farm


def test_the_farm_breaks_a_tie_in_code_point_order_whatever_order_the_rows_come_in(
    database_url: str, stored: Stored
) -> None:
    """The candidates come in the order DISTINCT ON sorted them, the database's collation (en_US and C
    order "M=512,..." and "M=5120,..." differently; this machine's is C): the tie must not follow it."""
    spec = get_kernel(KERNEL)
    problem = {**PROBLEM, "M": 1024}
    with session_scope(database_url) as session:
        candidates = [c for c in best_store._measured_problems(session, spec) if c[1] == stored.nearest_gpu]
        assert len(candidates) == 2
        for order in (candidates, candidates[::-1]):
            found = best_store._pick(session, spec, problem, spec.problem_key(problem), order)
            assert found is not None and found[1] == 1
            assert found[0].problem["M"] == 2048  # "M=2048,..." before "M=512,..." by code point
