"""One coordinator step for one job: history → optimizer → ask → insert trials → dispatch.

The step is stateless and idempotent: it rebuilds the optimizer from Postgres every time, holds the
job's row lock while it decides (so concurrent steps of one job serialize), and sends messages only
after the transaction that created the trials has committed. Nothing here waits for a result: a
finished trial triggers the next step.
"""

from __future__ import annotations

import json
import logging
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from kernelfarm.core.capabilities import missing, routed_model
from kernelfarm.core.celery_app import EVALUATE_TASK, PROFILE_TASK
from kernelfarm.core.db import session_scope
from kernelfarm.core.dead_deliveries import Delivery
from kernelfarm.core.errors import InvalidInput, KernelfarmError
from kernelfarm.core.models import GpuWorker, Job, Trial, TrialProfile
from kernelfarm.core.objectives import measures_energy
from kernelfarm.core.settings import Settings
from kernelfarm.core.space import SearchSpace
from kernelfarm.core.states import JobState, TrialState
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store import profiles as profile_store
from kernelfarm.core.store import trials as trial_store
from kernelfarm.core.store.workers import SILENCE_HEARTBEATS, absent_workers, live_workers, stopped_within
from kernelfarm.core.strategy_options import check_strategy_options
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.tuner.history import describe_prior, observations, prior_observations, prior_use
from kernelfarm.tuner.profiling import plan_profiles
from kernelfarm.tuner.strategies.base import Observation
from kernelfarm.tuner.strategies.registry import get_strategy

logger = logging.getLogger(__name__)
# An energy job stops searching, and fails saying why, once this many of its trials completed and none has
# an energy reading (a GPU or backend without a meter would otherwise spend the job's whole budget first).
ENERGY_GIVE_UP_AFTER = 8

# (trial id, route) → send to the route's queue; the route is the GPU model, or the model plus what
# the kernel requires (core/capabilities.py: only capable workers consume that queue)
Dispatch = Callable[[int, str], None]
# (job id, trial ids, gpu model) → send one profile batch to the model's queue
DispatchProfiles = Callable[[uuid.UUID, list[int], str], None]


@dataclass(frozen=True)
class StepResult:
    dispatched: list[int]
    state: str
    message: str
    ask_seconds: float = 0.0
    profile_batches: tuple[tuple[int, ...], ...] = ()


def job_space(job: Job, kernel_version: int | None = None) -> SearchSpace:
    return _cached_space(job.kernel_name, kernel_version, json.dumps(job.space, sort_keys=True))


@lru_cache(maxsize=64)
def _cached_space(kernel_name: str, kernel_version: int | None, restriction_json: str) -> SearchSpace:
    # Cached so the valid set (SearchSpace caches it) is enumerated once per job and process,
    # not on every step.
    restriction = json.loads(restriction_json)
    spec = get_kernel(kernel_name, kernel_version)
    return spec.space.restrict(restriction.get("parameters"), restriction.get("constraints", []))


def route_of(job: Job, kernel_version: int) -> tuple[str, frozenset[str]]:
    """Where the job's trials go: its GPU model, narrowed to workers that have what the kernel
    requires (a plugin at its version, the uploaded-Python opt-in)."""
    requires = get_kernel(job.kernel_name, kernel_version).requires
    return routed_model(job.gpu_model, requires), requires


def advance(
    job_id: uuid.UUID | str,
    settings: Settings,
    dispatch: Dispatch,
    dispatch_profiles: DispatchProfiles | None = None,
) -> StepResult:
    with session_scope() as session:
        result, to_send, model = _decide(session, job_id, settings)
    for trial_id in to_send:  # after commit: a worker can only claim rows that exist
        dispatch(trial_id, model)
    if dispatch_profiles is not None:
        for batch in result.profile_batches:
            dispatch_profiles(job_store.parse_job_id(job_id), list(batch), model)
    return result


def _decide(session: Session, job_id: uuid.UUID | str, settings: Settings) -> tuple[StepResult, list[int], str]:
    job = job_store.get_job(session, job_id, for_update=True)
    if JobState(job.state).finished:
        return StepResult([], job.state, job.status_message), [], job.gpu_model
    job.step_failures = 0  # committed only with a step that succeeds (tuner/step_failures.py)
    try:
        version = job_store.kernel_version(session, job)
        space = job_space(job, version)
        route, requires = route_of(job, version)
    except KernelfarmError as exc:
        job_store.set_job_status(session, job, state=JobState.FAILED, message=f"cannot rebuild search space: {exc}")
        return StepResult([], job.state, job.status_message), [], job.gpu_model

    trials = trial_store.history_rows(session, job.id)
    counts: dict[str, int] = {}
    for trial in trials:
        counts[trial.state] = counts.get(trial.state, 0) + 1
    in_flight = counts.get(TrialState.QUEUED.value, 0) + counts.get(TrialState.RUNNING.value, 0)
    trials_left = (job.budget_trials - len(trials)) if job.budget_trials is not None else 1 << 30
    valid_left = len(space.valid_indices(job.problem)) - len(trials)
    out_of_time = _out_of_time(session, job)

    if out_of_time and counts.get(TrialState.COMPLETE.value, 0):
        # Once the job has a result, a spent time budget leaves its not yet started trials unrun. Before
        # its first result they stay: the job would fail.
        in_flight -= _cancel_queued(session, job, counts)
    if trials_left <= 0 or valid_left <= 0 or out_of_time:
        reason = "time budget spent" if out_of_time else "space exhausted" if valid_left <= 0 else "trial budget spent"
        return _finish_or_drain(session, job, in_flight, counts, reason, settings), [], job.gpu_model

    no_energy = _no_energy_yet(session, job, counts)
    if no_energy:  # the job can only fail: its not yet started trials are not run either
        in_flight -= _cancel_queued(session, job, counts)
        return _finish_or_drain(session, job, in_flight, counts, no_energy, settings), [], job.gpu_model
    try:  # before waiting for a worker: such a job would otherwise wait, then fail for want of one
        check_strategy_options(job.strategy, job.strategy_options)
    except InvalidInput as exc:
        return _finish_or_drain(session, job, in_flight, counts, _unbuildable(exc), settings), [], job.gpu_model

    workers = live_workers(session, settings.worker_ttl_seconds, job.gpu_model)
    if not workers:
        return _wait_for_workers(session, job, settings), [], job.gpu_model
    if requires and not any(not missing(requires, w.capabilities or []) for w in workers):
        message = _no_capable_worker(job, requires, workers)
        job_store.set_job_status(session, job, message=message)
        return StepResult([], job.state, message), [], route

    lookahead = math.ceil(job.parallelism * settings.dispatch_lookahead)
    target = min(job.parallelism + lookahead, _fair_share(session, job, len(workers), settings))
    wanted = min(target - in_flight, trials_left, valid_left)
    if wanted <= 0:
        return StepResult([], job.state, job.status_message), [], job.gpu_model

    prior = prior_observations(session, job, space) if job.warm_start else []
    started = time.perf_counter()
    history = observations(trials, job.objective, int(job.seed))
    try:
        strategy = get_strategy(job.strategy)
        options = job.strategy_options
        if getattr(strategy, "wants_gpu_model", False):  # an LLM arm tells its endpoint the GPU
            options = {**options, "gpu_model": job.gpu_model}
        optimizer = strategy.from_history(space, job.problem, history, int(job.seed), options, prior=prior)
    except InvalidInput as exc:
        # The API refuses such options; a job stored before it did, or before a strategy or an option
        # was removed, would otherwise raise at every step and never finish. Most are caught above; a
        # strategy may still refuse what only its build sees (its space, its prior).
        return _finish_or_drain(session, job, in_flight, counts, _unbuildable(exc), settings), [], job.gpu_model
    configs = optimizer.ask(wanted)
    ask_seconds = time.perf_counter() - started
    if not configs:
        return _finish_or_drain(session, job, in_flight, counts, "space exhausted", settings), [], job.gpu_model

    proposed_by: dict[str, str] = getattr(optimizer, "proposed_by", {})
    new = trial_store.add_trials(session, job, [(space.key(c), c) for c in configs], proposed_by)
    trial_store.mark_dispatched(session, [t.id for t in new])
    total = len(trials) + len(new)
    budget = job.budget_trials if job.budget_trials is not None else "∞"
    message = f"running: {total}/{budget} trials proposed, {in_flight + len(new)} in flight"
    if job.warm_start:
        dropped, waiting = _prior_verdict(prior, optimizer)
        message += f"; {describe_prior(prior, dropped, waiting)}"
        job.warm_start_prior = prior_use(prior, dropped, waiting)
    job_store.set_job_status(session, job, state=JobState.RUNNING, message=message)
    logger.info("job %s: dispatched %d trials (ask %.0f ms)", job.id, len(new), ask_seconds * 1e3)
    ids = [t.id for t in new]
    profiles = plan_profiles(session, job, settings.profile_batch_size, search_done=False)
    result = StepResult(ids, job.state, job.status_message, ask_seconds, _tuples(profiles.batches))
    return result, ids, route


def _cancel_queued(session: Session, job: Job, counts: dict[str, int]) -> int:
    """Cancel the job's trials that no worker has started, for a job that stops searching while it
    still has some (running ones finish), updating ``counts``. A step queues parallelism x
    (1 + dispatch_lookahead) trials: a 0.001 s job of parallelism 256 measured all 512 for 7 s after
    its budget (hours, at seconds of compiling per trial), and an energy job on a backend without a
    meter 514 trials before it failed. Returns how many were cancelled."""
    if not counts.get(TrialState.QUEUED.value, 0):
        return 0
    cancelled = trial_store.cancel_queued(session, job.id)
    counts[TrialState.QUEUED.value] -= cancelled
    counts[TrialState.CANCELLED.value] = counts.get(TrialState.CANCELLED.value, 0) + cancelled
    return cancelled


def _unbuildable(exc: InvalidInput) -> str:
    return f"cannot build its strategy: {exc}"


def _prior_verdict(prior: Sequence[Observation], optimizer: object) -> tuple[bool, bool]:
    """(dropped, waiting): what the strategy's gate made of the prior; strategies without a gate use
    every prior they get."""
    dropped = bool(getattr(optimizer, "prior_dropped", False))
    waiting = bool(prior) and not dropped and not getattr(optimizer, "prior_used", True)
    return dropped, waiting


def _no_capable_worker(job: Job, requires: frozenset[str], live: Sequence[GpuWorker]) -> str:
    """Why no live worker takes the job's trials: what the kernel needs and what each worker has."""
    have = "; ".join(
        f"{w.name} has {', '.join(sorted(w.capabilities)) if w.capabilities else 'no kernel plugins'}" for w in live
    )
    return (
        f"waiting: no live worker for GPU model {job.gpu_model!r} has {', '.join(sorted(requires))} "
        f"(the kernel needs it; {have})"
    )


def _fair_share(session: Session, job: Job, workers: int, settings: Settings) -> int:
    """Trials one job may have in flight while other jobs share its GPU model.

    The model's workers keep ``workers * (1 + dispatch_lookahead)`` trials usefully in flight; each
    unfinished job of the model gets an equal part of that (at least one). A GPU queue is first in,
    first out: without the cap, a wide job kept its part of the queue full and a new job's trials
    waited behind all of it. A job alone on its model keeps its own parallelism.
    """
    active = session.execute(
        select(func.count())
        .select_from(Job)
        .where(Job.gpu_model == job.gpu_model, Job.state.in_([JobState.QUEUED.value, JobState.RUNNING.value]))
    ).scalar_one()
    if active <= 1:
        return 1 << 30
    capacity = workers * (1 + settings.dispatch_lookahead)
    return max(1, math.ceil(capacity / active))


def _wait_for_workers(session: Session, job: Job, settings: Settings) -> StepResult:
    """No live worker serves the job's GPU model: wait, but not forever (a job for a model nobody
    serves waited silently until someone noticed)."""
    now: datetime = session.execute(select(func.now())).scalar_one()
    idle = (now - job_store.last_activity(session, job)).total_seconds()
    if idle >= settings.no_worker_timeout_seconds:
        message = (
            f"failed: no live worker for GPU model {job.gpu_model!r} for {idle:.0f} s "
            f"(no_worker_timeout_seconds={settings.no_worker_timeout_seconds:g})"
        )
        job_store.fail_job(session, job, message)
        logger.warning("job %s: %s", job.id, message)
        return StepResult([], job.state, message)
    message = (
        f"waiting: no live worker for GPU model {job.gpu_model!r} "
        f"(fails after {settings.no_worker_timeout_seconds:g} s without one)"
    )
    job_store.set_job_status(session, job, message=message)
    return StepResult([], job.state, message)


def _tuples(batches: list[list[int]]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(batch) for batch in batches)


def _no_energy_yet(session: Session, job: Job, counts: dict[str, int]) -> str | None:
    """Why an energy job stops searching early, or None: its first ``ENERGY_GIVE_UP_AFTER`` complete trials
    all came back without an energy reading (the GPU or the backend has no meter, or the meter keeps giving
    up), so the rest of its budget would be spent for a job that can only fail."""
    complete = counts.get(TrialState.COMPLETE.value, 0)
    if not measures_energy(job.objective) or complete < ENERGY_GIVE_UP_AFTER:
        return None
    if job_store.energy_readings(session, job.id):
        return None
    _, why = job_store.energy_missing(session, job.id)
    return f"no energy reading in {complete} complete trials" + (f" ({why})" if why else "")


def _out_of_time(session: Session, job: Job) -> bool:
    if job.budget_seconds is None or job.started_at is None:
        return False
    now: datetime = session.execute(select(func.now())).scalar_one()
    started = job.started_at if job.started_at.tzinfo else job.started_at.replace(tzinfo=UTC)
    return (now - started).total_seconds() >= job.budget_seconds


def _finish_or_drain(
    session: Session, job: Job, in_flight: int, counts: dict[str, int], reason: str, settings: Settings
) -> StepResult:
    if in_flight:
        message = f"draining: {reason}; waiting for {in_flight} trial(s) in flight"
        job_store.set_job_status(session, job, message=message)
        return StepResult([], job.state, message)
    workers = len(live_workers(session, settings.worker_ttl_seconds, job.gpu_model))
    profiles = plan_profiles(session, job, settings.profile_batch_size, search_done=True, workers=workers)
    if profiles.outstanding:
        message = f"profiling: {reason}; waiting for {profiles.outstanding} Nsight Compute profile(s)"
        job_store.set_job_status(session, job, message=message)
        return StepResult([], job.state, message, profile_batches=_tuples(profiles.batches))
    complete = counts.get(TrialState.COMPLETE.value, 0)
    failed = counts.get(TrialState.FAILED.value, 0)
    best = job_store.best_trial_of_job(session, job.id, job.objective)
    summary = f"{complete} complete, {failed} failed"
    missing, why = job_store.energy_missing(session, job.id) if measures_energy(job.objective) else (0, None)
    if missing:
        summary += f", {missing} without an energy reading (latest: {why})"
    if best is None:  # nothing usable came out of it: the job failed, whatever its budget says
        # Energy is what is missing only when a config succeeded (complete and verified) and still
        # cannot win: completed trials that all failed verification are no config succeeding.
        succeeded = measures_energy(job.objective) and job_store.best_trial_of_job(session, job.id) is not None
        lack = "no energy measured" if succeeded else "no config succeeded"
        message = f"failed ({reason}): {summary}; {lack}"
        job_store.set_job_status(session, job, state=JobState.FAILED, message=message)
        return StepResult([], job.state, message)
    energy = f"{float(best.metrics['energy_mj']):.4g} mJ, " if measures_energy(job.objective) else ""
    message = f"complete ({reason}): {summary}; best {energy}{best.time_ms:.4f} ms ({best.config_key})"
    job_store.set_job_status(session, job, state=JobState.COMPLETE, message=message)
    return StepResult([], job.state, message)


@dataclass(frozen=True)
class Housekeeping:
    requeued: list[tuple[int, str]]
    redispatched: list[tuple[int, str]]
    jobs_to_advance: list[uuid.UUID]
    profile_batches: list[tuple[uuid.UUID, str, list[int]]] = field(default_factory=list)
    gone_workers: list[str] = field(default_factory=list)


def housekeeping(settings: Settings, broker_emptied: bool = False) -> Housekeeping:
    """Reap dead workers' trials, re-send trials whose message may be lost, and list unfinished
    jobs to step again (covers lost 'advance' messages and jobs waiting for a worker).

    Args:
        broker_emptied: the broker lost every message it held (core/advance_requests.py): every
            queued trial and unclaimed profile batch is re-sent now, not after redispatch_after_seconds.
    """
    unclaimed_after = 0.0 if broker_emptied else settings.redispatch_after_seconds
    with session_scope() as session:
        gone = _gone_workers(session, settings)
        ended, reaped = _reap(session, settings, gone)
        live = live_workers(session, settings.worker_ttl_seconds)
        live_models = {w.gpu_model for w in live}
        stale = trial_store.stale_queued(session, unclaimed_after, sorted(live_models))
        # A profile batch nobody took is re-sent as fast as a trial nobody took; a taken one when its
        # worker died, or after profile_redispatch_after_seconds (a batch that overran).
        lost_profiles = profile_store.stale_requests(
            session, unclaimed_after, settings.profile_redispatch_after_seconds, [w.name for w in live]
        )
        unfinished = (
            session.execute(
                select(Job.id)
                .where(Job.state.in_([JobState.QUEUED.value, JobState.RUNNING.value]))
                .order_by(Job.created_at)
                .limit(500)
            )
            .scalars()
            .all()
        )
        requeued, stale = _routed(session, reaped.requeued), _routed(session, stale)
    _log_reaping(gone, ended, reaped)
    if broker_emptied and (stale or lost_profiles):
        logger.warning("the broker lost its messages: re-sent %d queued trial(s) at once", len(stale))
    return Housekeeping(requeued, stale, list(unfinished), lost_profiles, gone)


def sweep_gone_workers(settings: Settings) -> tuple[list[str], list[tuple[int, str]]]:
    """Between housekeeping ticks: requeue the trials of worker processes that died, the first part
    of :func:`housekeeping` alone (both may run at once: every change is a conditional UPDATE).

    Returns:
        The workers found gone now, and (trial id, route) of each trial requeued now, to send again.
    """
    with session_scope() as session:
        gone = _gone_workers(session, settings)
        if not gone:
            return [], []
        ended, reaped = _reap(session, settings, gone)
        requeued = _routed(session, reaped.requeued)
    _log_reaping(gone, ended, reaped)
    return gone, requeued


def _gone_workers(session: Session, settings: Settings) -> list[str]:
    """Worker processes that died: their presence lock went with their connection, so their trials are
    freed now; the lease stays the rule for one that is stuck but alive (it keeps its lock). A lock taken
    before the server last reinitialised also needs SILENCE_HEARTBEATS silent periods (see there)."""
    return absent_workers(session, SILENCE_HEARTBEATS * settings.heartbeat_seconds)


def _reap(session: Session, settings: Settings, gone: Sequence[str]) -> tuple[int, trial_store.Reaped]:
    """End the leases of the ``gone`` workers' trials, then requeue (or fail, at the retry cap) every
    trial whose lease ended or ran out. Returns how many leases were ended, and what was reaped."""
    ended = trial_store.expire_leases_of(session, gone)
    return ended, trial_store.reap_expired_leases(session, settings.lease_seconds, settings.max_attempts)


def _log_reaping(gone: Sequence[str], ended: int, reaped: trial_store.Reaped) -> None:
    if gone:
        logger.warning("worker(s) gone (presence lock released): %s; %d lease(s) ended at once", ", ".join(gone), ended)
    if reaped.requeued or reaped.failed:
        logger.warning("reaper: requeued %d, failed %d (retry cap)", len(reaped.requeued), len(reaped.failed))


def workers_gone_within(seconds: float) -> bool:
    """Was a worker found gone (or stopped) in the last ``seconds``? Its taken messages may still be
    too young to restore (core/dead_deliveries.py CLAIM_GRACE_S) when it is found: the sweeps and
    housekeeping ticks after that look again."""
    with session_scope() as session:
        return stopped_within(session, seconds)


def unclaimed_deliveries(deliveries: Sequence[Delivery]) -> list[str]:
    """The tags of deliveries whose work nobody claimed: a trial still queued, a profile batch none of
    whose requests is claimed or answered (core/dead_deliveries.py)."""
    trial_ids = {int(d.args[0]) for d in deliveries if d.task == EVALUATE_TASK and d.args}
    batches = {d.tag: [int(t) for t in d.args[1]] for d in deliveries if d.task == PROFILE_TASK and len(d.args) > 1}
    with session_scope() as session:
        queued = set(
            session.execute(
                select(Trial.id).where(Trial.id.in_(trial_ids), Trial.state == TrialState.QUEUED.value)
            ).scalars()
        ) if trial_ids else set()  # fmt: skip
        wanted = {t for ids in batches.values() for t in ids}
        touched = set(
            session.execute(
                select(TrialProfile.trial_id).where(
                    TrialProfile.trial_id.in_(wanted),
                    TrialProfile.claimed_at.is_not(None) | TrialProfile.profiled_at.is_not(None),
                )
            ).scalars()
        ) if wanted else set()  # fmt: skip
    tags = [d.tag for d in deliveries if d.task == EVALUATE_TASK and d.args and int(d.args[0]) in queued]
    return tags + [tag for tag, ids in batches.items() if ids and not touched.intersection(ids)]


def _routed(session: Session, trials: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """(trial id, GPU model) -> (trial id, route): a trial that needs a capability is re-sent where
    only capable workers take it, as its first dispatch was."""
    if not trials:
        return trials
    ids = [trial_id for trial_id, _ in trials]
    rows = session.execute(select(Trial.id, Job).join(Job, Trial.job_id == Job.id).where(Trial.id.in_(ids))).all()
    routes: dict[int, str] = {}
    for trial_id, job in rows:
        try:
            routes[trial_id] = route_of(job, job_store.kernel_version(session, job))[0]
        except KernelfarmError:  # the kernel is gone here: the step will fail the job and say why
            routes[trial_id] = job.gpu_model
    return [(trial_id, routes.get(trial_id, model)) for trial_id, model in trials]
