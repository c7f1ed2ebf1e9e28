"""Turning a validated request into a job row, and a job row into its public form."""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import uuid
from typing import Any

from celery import Celery
from sqlalchemy.orm import Session

from kernelfarm.api.schemas import BestSoFar, JobCreate, JobPublic, Progress, WarmStartPrior
from kernelfarm.core.advance_requests import request_advance
from kernelfarm.core.errors import Conflict, InvalidInput
from kernelfarm.core.gpu import model_slug
from kernelfarm.core.key_lengths import PROBLEM_KEY_LENGTH
from kernelfarm.core.models import Job
from kernelfarm.core.settings import Settings
from kernelfarm.core.space import SearchSpace
from kernelfarm.core.states import JobState, TrialState
from kernelfarm.core.store import idempotency
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store.kernels import ensure_kernel
from kernelfarm.core.store.locks import hold_until_commit
from kernelfarm.core.store.workers import all_workers, model_memory_bytes
from kernelfarm.core.strategy_names import DEFAULT_STRATEGY
from kernelfarm.core.strategy_options import check_strategy_options
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.kernels.spec import KernelSpec, format_bytes

logger = logging.getLogger(__name__)


def create_job(
    session: Session, request: JobCreate, owner: str, settings: Settings, *, quota_exempt: bool = False
) -> Job:
    """Validate everything that can be validated before anything is stored.

    Args:
        quota_exempt: admins are not held to ``max_active_jobs_per_owner``.

    Raises:
        NotFound: unknown kernel (mapped to 422 by the route: it is a field of the body).
        InvalidInput: bad problem, empty or oversized space, unknown strategy or options it refuses,
            limits exceeded.
        Conflict: the owner already has ``max_active_jobs_per_owner`` unfinished jobs.
    """
    spec = get_kernel(request.kernel, request.kernel_version)
    if request.kernel_version is not None and request.kernel_version != spec.version:
        # A catalogue or plugin kernel is the one installed here: a job pinned to another version
        # would be stored as pinned to this one.
        raise InvalidInput(
            f"kernel_version: {request.kernel!r} is at version {spec.version} here, not {request.kernel_version}"
        )
    problem = spec.normalize_problem(request.problem)
    problem_key = _storable_problem_key(spec, problem)
    try:
        gpu_model = model_slug(request.gpu_model)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    recordings = spec.recordings
    if spec.replay_only and recordings is not None and gpu_model not in recordings.gpu_models:
        raise InvalidInput(
            f"kernel {spec.name!r} is replay-only and recorded for {sorted(recordings.gpu_models)}, not {gpu_model!r}"
        )
    _check_some_backend_runs_it(session, spec, gpu_model)
    _check_problem_fits(session, spec, problem, gpu_model, settings)
    strategy = request.strategy or DEFAULT_STRATEGY
    check_strategy_options(strategy, request.strategy_options)  # an unknown strategy too
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
    # Uploads are checked for this (kernels/manifest/bundle.py); a version stored before they were, a
    # catalogue or plugin kernel are not: their trials' INSERTs failed at every coordinator step.
    if (reason := space.key_length_refusal()) is not None:
        raise InvalidInput(f"kernel {spec.name!r}: {reason}")
    valid = len(space.valid_indices(problem))
    if valid == 0:
        raise InvalidInput(_empty_space_reason(space, problem))
    if not quota_exempt:
        # One owner's submissions count and insert one at a time: each waits here, until the commit
        # of the one before, for the lock of its owner. Without it, 40 concurrent requests of an owner
        # at the limit of 20 all counted before any committed, and 28 were accepted.
        hold_until_commit(session, f"job_quota:{owner}")
        active = job_store.count_unfinished(session, owner)
        if active >= settings.max_active_jobs_per_owner:
            raise Conflict(
                f"{owner!r} already has {active} unfinished jobs (the limit is {settings.max_active_jobs_per_owner}); "
                "wait for one to finish or cancel one"
            )
    kernel_row = ensure_kernel(session, spec)
    return job_store.create_job(
        session,
        job_store.NewJob(
            kernel_id=kernel_row.id,
            kernel_name=spec.name,
            problem=problem,
            problem_key=problem_key,
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


def _storable_problem_key(spec: KernelSpec, problem: dict[str, Any]) -> str:
    """The problem's key, refused when it is longer than a job stores: uploads are checked for such
    problems (kernels/manifest/bundle.py), but a version stored before they were is not, and its job's
    INSERT failed, a 500."""
    key = spec.problem_key(problem)
    if len(key) > PROBLEM_KEY_LENGTH:
        raise InvalidInput(
            f"problem: its key (name=value of each problem parameter, comma-joined) is {len(key)} characters "
            f"long, more than the {PROBLEM_KEY_LENGTH} a job stores; kernel {spec.name!r} needs shorter "
            "parameter names or smaller values"
        )
    return key


def backend_runs(spec: KernelSpec, backend: str, gpu_model: str) -> bool:
    """Whether a worker of ``backend`` serving ``gpu_model`` can measure ``spec``."""
    if backend == "replay":  # only what was recorded on that very GPU model
        return "replay" in spec.backends and spec.recordings is not None and gpu_model in spec.recordings.gpu_models
    if backend == "fake":  # the CPU stand-in answers CUDA kernels' requests
        return "cuda" in spec.backends
    return backend in spec.backends


def _check_some_backend_runs_it(session: Session, spec: KernelSpec, gpu_model: str) -> None:
    """Refuse a job that no worker ever registered for its GPU model could run (a cuda-only kernel
    on a model served by replay workers was accepted and ended with 0 successes). A model with no
    registered worker at all is accepted: its first worker may be on its way; the job then fails
    after ``no_worker_timeout_seconds`` if none comes."""
    backends = {w.backend for w in all_workers(session) if w.gpu_model == gpu_model}
    if backends and not any(backend_runs(spec, b, gpu_model) for b in backends):
        raise InvalidInput(
            f"no worker of GPU model {gpu_model!r} can run kernel {spec.name!r}: its workers run "
            f"{sorted(backends)}, the kernel has implementations for {sorted(spec.backends)}"
            + (f" and recordings for {sorted(spec.recordings.gpu_models)}" if spec.recordings else "")
        )


def _empty_space_reason(space: SearchSpace, problem: dict[str, Any]) -> str:
    """Why no config is left, naming the constraints that alone leave none (and those dividing by
    zero in every config): "empty search space" by itself left the submitter to guess which of the
    kernel's constraints and their own restriction it was."""
    reason = "empty search space: no config satisfies the parameters and constraints for this problem"
    culprits = space.constraints_leaving_nothing(problem)
    if not culprits:
        return reason + " (each constraint alone leaves some: together they leave none)"
    named = [f"{text!r}" + (" (it divides by zero in every config)" if divides else "") for text, divides in culprits]
    return (
        reason
        + "; on its own, no config satisfies "
        + ", ".join(named[:5])
        + (f" (and {len(named) - 5} more)" if len(named) > 5 else "")
    )


def memory_limit(session: Session, gpu_model: str, settings: Settings) -> tuple[int, str]:
    """The device memory a job's problem on ``gpu_model`` may need, and whose limit it is: the least
    total memory any worker of the model registered with (a trial may land on any of them), else,
    where none reported one (replay and fake workers, or no worker yet), ``max_problem_bytes``."""
    memory = model_memory_bytes(session, gpu_model)
    if memory is not None:
        return memory, f"the {format_bytes(memory)} of GPU model {gpu_model!r} (the least its workers reported)"
    ceiling = settings.max_problem_bytes
    return ceiling, (
        f"the farm's limit of {format_bytes(ceiling)} for a GPU model whose memory no worker reported "
        "(KERNELFARM_MAX_PROBLEM_BYTES)"
    )


def _check_problem_fits(
    session: Session, spec: KernelSpec, problem: dict[str, Any], gpu_model: str, settings: Settings
) -> None:
    """Refuse a problem that cannot fit in the memory of the job's GPU model: every trial of it would
    fail on the worker. A kernel that declares no footprint (KernelSpec.device_bytes: recordings, a
    plugin that does not say) is accepted whatever its problem's size."""
    limit, whose = memory_limit(session, gpu_model, settings)
    refusal = spec.memory_refusal(problem, limit, whose)
    if refusal is not None:
        raise InvalidInput(refusal)


def create_job_once(
    session: Session,
    request: JobCreate,
    owner: str,
    settings: Settings,
    idempotency_key: str | None,
    quota_exempt: bool = False,
) -> tuple[Job, bool]:
    """:func:`create_job`, except that a request carrying an ``Idempotency-Key`` this owner used
    before gets that job back (``created`` False), also while the first request is still running.

    Raises:
        Conflict: the key was used for a different request body.
    """
    if idempotency_key is None:
        return create_job(session, request, owner, settings, quota_exempt=quota_exempt), True
    digest = request_digest(request)
    try:
        existing = idempotency.job_for_key(session, owner, idempotency_key, digest)
    except Conflict:
        # A key stored before digests were canonical holds the digest of the body as parsed, keys in
        # the order sent: the same retry must still find its job across the upgrade.
        legacy = hashlib.sha256(request.model_dump_json().encode()).hexdigest()
        if legacy == digest:
            raise
        existing = idempotency.job_for_key(session, owner, idempotency_key, legacy)
    if existing is not None:
        return job_store.get_job(session, existing), False
    job = create_job(session, request, owner, settings, quota_exempt=quota_exempt)
    winner: uuid.UUID = idempotency.claim_key(session, owner, idempotency_key, job.id, digest)
    if winner != job.id:  # a concurrent request with the same key committed first: its job is the answer
        session.rollback()
        return job_store.get_job(session, winner), False
    return job, True


def request_digest(request: JobCreate) -> str:
    """What an Idempotency-Key is bound to: the request as parsed, its objects' keys sorted. JSON gives
    the order of an object's keys no meaning, and a retry that sent ``{"xi": 0.1, "n_init": 4}`` for
    ``{"n_init": 4, "xi": 0.1}`` was refused (409) as a different request."""
    canonical = json.dumps(request.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def request_step(celery: Celery, job_id: str) -> None:
    """Ask the coordinator to step the job. If the broker is down the job is still stored and the
    coordinator's housekeeping picks it up once the broker is back: log, don't fail the request."""
    try:
        request_advance(celery, job_id)
    except Exception:
        logger.warning("could not notify the coordinator about job %s; housekeeping will", job_id, exc_info=True)


def status_message(job: Job, progress: job_store.Progress) -> str:
    """A running job's message is rebuilt from the same counts as its progress, so the two always
    agree (the coordinator's message was written when it last dispatched, and went stale)."""
    if job.state != JobState.RUNNING.value or not job.status_message.startswith("running:"):
        return job.status_message
    counts = progress.counts
    budget = job.budget_trials if job.budget_trials is not None else "∞"
    return (
        f"running: {progress.total}/{budget} trials proposed, {progress.in_flight} in flight, "
        f"{counts.get(TrialState.COMPLETE.value, 0)} complete, {counts.get(TrialState.FAILED.value, 0)} failed"
    )


def to_public(session: Session, job: Job) -> JobPublic:
    progress = job_store.job_progress(session, job.id, job.objective)
    counts = progress.counts
    best = progress.best
    return JobPublic(
        id=job.id,
        kernel=job.kernel_name,
        kernel_version=job_store.kernel_version(session, job),
        problem=job.problem,
        gpu_model=job.gpu_model,
        objective=job.objective,
        strategy=job.strategy,
        strategy_options=job.strategy_options,
        budget_trials=job.budget_trials,
        budget_seconds=job.budget_seconds,
        parallelism=job.parallelism,
        seed=job.seed,
        profile=job.profile,
        profile_top_k=job.profile_top_k,
        warm_start=job.warm_start,
        warm_start_prior=WarmStartPrior.model_validate(job.warm_start_prior) if job.warm_start_prior else None,
        state=job.state,
        status_message=status_message(job, progress),
        owner=job.owner,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        progress=Progress(total=progress.total, **{s.value: counts.get(s.value, 0) for s in TrialState}),
        best=BestSoFar(
            trial_id=best.id,
            config=best.config,
            config_key=best.config_key,
            time_ms=best.time_ms,
            energy_mj=(best.metrics or {}).get("energy_mj"),
        )
        if best is not None and best.time_ms is not None
        else None,
    )
