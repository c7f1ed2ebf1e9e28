"""Turning a validated request into a job row, and a job row into its public form."""

from __future__ import annotations

import logging
import secrets

from celery import Celery
from sqlalchemy.orm import Session

from kernelfarm.api.schemas import BestSoFar, JobCreate, JobPublic, Progress
from kernelfarm.core.celery_app import ADVANCE_TASK, TUNER_QUEUE
from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.gpu import model_slug
from kernelfarm.core.models import Job
from kernelfarm.core.settings import Settings
from kernelfarm.core.states import TrialState
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store.kernels import ensure_kernel
from kernelfarm.core.strategy_names import DEFAULT_STRATEGY, STRATEGY_NAMES
from kernelfarm.kernels.registry import get_kernel

logger = logging.getLogger(__name__)


def create_job(session: Session, request: JobCreate, owner: str, settings: Settings) -> Job:
    """Validate everything that can be validated before anything is stored.

    Raises:
        NotFound: unknown kernel (mapped to 422 by the route: it is a field of the body).
        InvalidInput: bad problem, empty or oversized space, unknown strategy, limits exceeded.
    """
    spec = get_kernel(request.kernel)
    problem = spec.normalize_problem(request.problem)
    try:
        gpu_model = model_slug(request.gpu_model)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    recordings = spec.recordings
    if spec.replay_only and recordings is not None and gpu_model not in recordings.gpu_models:
        raise InvalidInput(
            f"kernel {spec.name!r} is replay-only and recorded for {sorted(recordings.gpu_models)}, not {gpu_model!r}"
        )
    strategy = request.strategy or DEFAULT_STRATEGY
    if strategy not in STRATEGY_NAMES:
        raise InvalidInput(f"unknown strategy {strategy!r}; available: {list(STRATEGY_NAMES)}")
    if request.budget_trials is not None and request.budget_trials > settings.max_budget_trials:
        raise InvalidInput(f"budget_trials is limited to {settings.max_budget_trials}")
    if request.parallelism > settings.max_parallelism:
        raise InvalidInput(f"parallelism is limited to {settings.max_parallelism}")
    restriction = request.space or None
    space = spec.space.restrict(
        restriction.parameters if restriction else None, restriction.constraints if restriction else ()
    )
    if space.cartesian_size > settings.max_space_size * 100:
        raise InvalidInput("search space too large")
    valid = len(space.valid_indices(problem))
    if valid == 0:
        raise InvalidInput("empty search space: no config satisfies the parameters and constraints for this problem")
    kernel_row = ensure_kernel(session, spec)
    return job_store.create_job(
        session,
        job_store.NewJob(
            kernel_id=kernel_row.id,
            kernel_name=spec.name,
            problem=problem,
            problem_key=spec.problem_key(problem),
            gpu_model=gpu_model,
            space={
                "parameters": dict(restriction.parameters) if restriction else {},
                "constraints": list(restriction.constraints) if restriction else [],
            },
            strategy=strategy,
            strategy_options=request.strategy_options,
            seed=request.seed if request.seed is not None else secrets.randbelow(2**31),
            budget_trials=request.budget_trials,
            budget_seconds=request.budget_seconds,
            parallelism=request.parallelism,
            profile=request.profile.value,
            profile_top_k=request.profile_top_k,
            warm_start=request.warm_start,
            owner=owner,
            objective=request.objective,
        ),
    )


def request_step(celery: Celery, job_id: str) -> None:
    """Ask the coordinator to step the job. If the broker is down the job is still stored and the
    coordinator's housekeeping picks it up once the broker is back: log, don't fail the request."""
    try:
        celery.send_task(ADVANCE_TASK, args=[job_id], queue=TUNER_QUEUE)
    except Exception:
        logger.warning("could not notify the coordinator about job %s; housekeeping will", job_id, exc_info=True)


def to_public(session: Session, job: Job) -> JobPublic:
    progress = job_store.job_progress(session, job.id)
    counts = progress.counts
    best = progress.best
    return JobPublic(
        id=job.id,
        kernel=job.kernel_name,
        problem=job.problem,
        gpu_model=job.gpu_model,
        objective=job.objective,
        strategy=job.strategy,
        budget_trials=job.budget_trials,
        budget_seconds=job.budget_seconds,
        parallelism=job.parallelism,
        seed=job.seed,
        profile=job.profile,
        profile_top_k=job.profile_top_k,
        warm_start=job.warm_start,
        state=job.state,
        status_message=job.status_message,
        owner=job.owner,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        progress=Progress(total=progress.total, **{s.value: counts.get(s.value, 0) for s in TrialState}),
        best=BestSoFar(trial_id=best.id, config=best.config, config_key=best.config_key, time_ms=best.time_ms)
        if best is not None and best.time_ms is not None
        else None,
    )
