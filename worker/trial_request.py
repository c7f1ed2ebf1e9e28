"""A trial as the backend sees it: the one place a :class:`MeasureRequest` is built from a trial.

The runner (the trial it claimed), compile-ahead (the job's queued trials) and the profile task
(measured trials) all describe a trial to the backend through :func:`measure_request`, so the
request the backend compiled ahead is the request it is later asked to measure, with the same
input seed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from kernelfarm.core.models import Job
from kernelfarm.core.objectives import measures_energy
from kernelfarm.core.store import jobs as job_store
from kernelfarm.worker.backends.base import MeasureRequest


def request_seed(job_seed: int, trial_id: int) -> int:
    """Input seed of a trial: fresh per trial, reproducible from the job's seed."""
    return (job_seed * 1_000_003 + trial_id) & 0x7FFFFFFF


def measure_request(
    *,
    trial_id: int,
    kernel_name: str,
    problem: Mapping[str, Any],
    config: Mapping[str, Any],
    job_seed: int,
    profile: bool,
    kernel_version: int | None = None,
    energy: bool = False,
) -> MeasureRequest:
    """The measure request of one trial of a job.

    Args:
        trial_id: the trial; with ``job_seed`` it fixes the input seed (:func:`request_seed`).
        kernel_name, problem: the job's kernel and problem shape.
        config: the trial's configuration.
        job_seed: the job's seed.
        kernel_version: the kernel version the job pinned (an uploaded kernel's upload number).
        profile: ask the backend for an Nsight Compute profile along with the measurement
            (``Backend.measure``/``measure_many`` take one; ``measure_stream`` never does). The
            worker's measuring path passes False: profiles are taken later, in batches
            (tuner/profiling.py plans them, worker/profiling.py runs them with True), because one
            ncu process per trial would cost seconds of start-up each.
        energy: meter the trial's energy per launch (the job's objective needs it:
            :func:`~kernelfarm.core.objectives.measures_energy`); a ``time`` job's trials skip the
            meter's second of GPU time.
    """
    return MeasureRequest(
        kernel_name=kernel_name,
        problem=dict(problem),
        config=dict(config),
        profile=profile,
        seed=request_seed(int(job_seed), trial_id),
        kernel_version=kernel_version,
        energy=energy,
    )


def job_trial_request(
    session: Session, job: Job, trial_id: int, config: Mapping[str, Any], *, profile: bool
) -> MeasureRequest:
    """:func:`measure_request` of a trial of ``job`` read from the database (its kernel at the version
    the job pinned)."""
    return measure_request(
        trial_id=trial_id,
        kernel_name=job.kernel_name,
        problem=job.problem,
        config=config,
        job_seed=job.seed,
        kernel_version=job_store.kernel_version(session, job),
        profile=profile,
        energy=measures_energy(job.objective),
    )
