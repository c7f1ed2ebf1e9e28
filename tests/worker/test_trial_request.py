"""The one place a trial becomes a MeasureRequest (worker/trial_request.py)."""

from __future__ import annotations

import uuid

from kernelfarm.core.store.trials import Claim
from kernelfarm.worker import runner
from kernelfarm.worker.trial_request import measure_request, request_seed


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
