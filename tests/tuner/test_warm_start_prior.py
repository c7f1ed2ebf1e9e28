"""Cross-GPU warm start on the real schema: which earlier trials become a job's prior, and what
its status says about them."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.orm import Session

from kernelfarm.core.db import session_scope
from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.core.models import Job
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store import trials as trial_store
from kernelfarm.core.store.kernels import ensure_kernel
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.tuner.history import describe_prior, prior_observations

SPEC = get_kernel("cn_pnpoly")
CONFIG = {"between_method": 0, "block_size_x": 32, "tile_size": 1, "use_method": 0}


def _job(session: Session, gpu: str, problem: dict[str, Any] | None = None, time_ms: float | None = None) -> Job:
    kernel = ensure_kernel(session, SPEC)
    problem = dict(problem or SPEC.default_problem)
    job = job_store.create_job(
        session,
        job_store.NewJob(
            kernel_id=kernel.id, kernel_name=SPEC.name, problem=problem, problem_key=SPEC.problem_key(problem),
            gpu_model=gpu, space={}, strategy="random", strategy_options={}, seed=1, budget_trials=10,
            budget_seconds=None, parallelism=2, profile="none", profile_top_k=5, warm_start=True, owner="test",
        ),
    )  # fmt: skip
    if time_ms is not None:
        (trial,) = trial_store.add_trials(session, job, [("0,32,1,0", CONFIG)])
        claim = trial_store.claim(session, trial.id, "w1", None)
        assert claim is not None
        result = Measurement(timing=TimingStats.from_times([time_ms] * 3), verified=True)
        assert trial_store.record_result(session, trial.id, claim.attempt, result)
    return job


def test_prior_is_the_same_kernel_and_problem_on_other_gpus(database_url: str) -> None:
    run = uuid.uuid4().hex[:8]  # GPU model names of this test only: the database is shared by the session
    with session_scope(database_url) as session:
        target = _job(session, f"target-{run}")
        other_gpu = _job(session, f"other-{run}", time_ms=2.0)
        _job(session, f"target-{run}", time_ms=4.0)  # an earlier job on the job's own GPU model: not a prior
        other_problem = {key: value * 2 for key, value in SPEC.default_problem.items()}
        _job(session, f"third-{run}", problem=other_problem, time_ms=3.0)
        prior = prior_observations(session, target, SPEC.space)
        mine = [o for o in prior if o.source in (other_gpu.gpu_model,)]
        assert len(mine) == 1 and mine[0].value == 2.0 and mine[0].config == CONFIG
        assert all(o.source != target.gpu_model for o in prior)  # never the job's own GPU model
        assert all(o.value not in (3.0, 4.0) for o in prior)  # never another problem, never its own GPU
        assert other_gpu.gpu_model in describe_prior(prior)
        assert describe_prior(prior).startswith(f"warm start: {len(prior)} trials from ")
    assert describe_prior([]).startswith("cold start")
