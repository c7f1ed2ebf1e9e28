"""The one place a trial becomes a MeasureRequest (worker/trial_request.py)."""

from __future__ import annotations

import secrets
import uuid

import pytest

from kernelfarm.core.db import session_scope
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store import trials as trial_store
from kernelfarm.core.store.trials import Claim
from kernelfarm.worker import runner
from kernelfarm.worker.trial_request import job_trial_request, measure_request, request_seed
from tests.conftest import store_job


def test_seed_is_fresh_per_trial_and_reproducible_from_the_job_seed() -> None:
    seeds = {request_seed(12345, trial_id) for trial_id in range(1000)}
    assert len(seeds) == 1000
    assert all(0 <= seed < 2**31 for seed in seeds)
    assert request_seed(12345, 7) == request_seed(12345, 7) != request_seed(12346, 7)


def test_profile_is_passed_through_and_the_mappings_are_copied() -> None:
    problem, config = {"n": 4096}, {"block_size_x": 128}
    request = measure_request(trial_id=7, kernel_name="vector_add", problem=problem, config=config, job_seed=3,
                              profile=True)  # fmt: skip
    assert request.profile is True and request.seed == request_seed(3, 7)
    problem["n"], config["block_size_x"] = 1, 1
    assert request.problem == {"n": 4096} and request.config == {"block_size_x": 128}


def test_the_runner_measures_without_a_profile_even_when_the_job_profiles_all() -> None:
    """Profiles are taken later in batches (worker/profiling.py); the measuring stream never takes one.
    The request names the kernel version the job pinned."""
    claim = Claim(trial_id=7, attempt=1, job_id=uuid.uuid4(), kernel_name="vector_add", problem={"n": 4096},
                  config={"block_size_x": 128}, profile="all", seed=3, kernel_version=2)  # fmt: skip
    expected = measure_request(trial_id=7, kernel_name="vector_add", problem={"n": 4096},
                               config={"block_size_x": 128}, job_seed=3, profile=False,
                               kernel_version=2)  # fmt: skip
    assert runner._request_of(claim) == expected


def add_job(database_url: str, objective: str) -> tuple[uuid.UUID, int]:
    """A job minimizing ``objective`` with one queued trial, on the real schema."""
    with session_scope(database_url) as session:
        job = store_job(session, "matmul_fp32", f"test-{secrets.token_hex(4)}", parallelism=1, objective=objective)
        [trial] = trial_store.add_trials(session, job, [("k", {"block_size_x": 128})])
        return job.id, trial.id


@pytest.mark.parametrize(("objective", "metered"), [("time", False), ("energy", True), ("time+energy", True)])
def test_only_jobs_that_rank_by_energy_ask_the_worker_to_meter_it(
    database_url: str, objective: str, metered: bool
) -> None:
    """The energy meter costs a trial about a second of GPU time: a ``time`` job's requests do not
    ask for it, on every path that builds one (the runner's claim, compile-ahead and profiling)."""
    job_id, trial_id = add_job(database_url, objective)
    with session_scope(database_url) as session:
        claim = trial_store.claim(session, trial_id, "test-worker", None)
        assert claim is not None and claim.objective == objective
    assert runner._request_of(claim).energy is metered
    with session_scope(database_url) as session:
        job = job_store.get_job(session, job_id)
        for profile in (False, True):
            request = job_trial_request(session, job, trial_id, {"block_size_x": 128}, profile=profile)
            assert request.energy is metered
        # compile-ahead's request is the one the runner later measures
        assert job_trial_request(session, job, trial_id, claim.config, profile=False) == runner._request_of(claim)
