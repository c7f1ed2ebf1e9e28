"""One trial on one worker: claim (lease) → measure → write the result (conditional on the
attempt) → ask the coordinator for the next step.

The hardware is injected (a Backend), so this runs the same with the cuda and replay backends.
While the backend measures, a heartbeat thread (worker/lease.py) keeps the lease alive with the
database clock; if the lease is lost (reaped, job cancelled) the measurement is discarded by the
conditional write. Each measurement runs under the soft and hard time limits of
worker/time_limits.py, and database actions retry through an outage (worker/db_retry.py).

With ``compile_ahead`` > 0 the job's next queued trials are compiled while the GPU measures, and
while the trial this worker was sent still compiles, queued trials that are compiled already are
measured meanwhile (worker/compile_ahead.py).

With ``measure_batch`` > 1 the worker does not stop at the trial it was sent: while the GPU
measures it, the worker claims the job's next queued trial that is compiled already, and the
backend queues that one on the GPU before the first result is written. So the result write, the
next-step request and the next claim happen while the GPU measures, not between measurements. A
worker holds at most two such trials at a time (plus, while it fills a compile wait, the sent trial
that still compiles); the claimed trials' own messages are skipped later as not claimable.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy import select

from kernelfarm.core.capabilities import missing
from kernelfarm.core.db import session_scope
from kernelfarm.core.errors import InvalidInput, NotFound
from kernelfarm.core.measurement import Measurement
from kernelfarm.core.models import Job, Kernel, Trial
from kernelfarm.core.objectives import measures_energy
from kernelfarm.core.states import FailureKind
from kernelfarm.core.store import trials as trial_store
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.worker.backends.base import Backend, KeepAlive, MeasureRequest
from kernelfarm.worker.compile_ahead import CompiledQueue
from kernelfarm.worker.db_retry import with_db_retry
from kernelfarm.worker.lease import LeaseKeeper
from kernelfarm.worker.time_limits import TimeLimits
from kernelfarm.worker.trial_request import measure_request

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    trial_id: int
    # "recorded" | "skipped" (not claimable) | "stale" (lease lost before the write) | "refused" (a
    # trial this worker must not measure: another GPU model's, or its kernel needs what it lacks)
    status: str
    job_id: uuid.UUID | None = None


@dataclass(frozen=True)
class Serves:
    """What a worker may measure: trials of its own GPU model whose kernel needs nothing it lacks.

    The coordinator routes each trial to a queue only such workers consume (core/capabilities.py), but
    a message can still reach another queue (sent by hand, by a misconfigured or older process, or by
    anyone with the broker's password). A worker that took it measured it: an RTX 3090's timing was
    stored as an H100 trial and served as the H100's best config, and a worker without the
    uploaded-Python opt-in would run an uploaded Python reference (docs/SECURITY.md, "Kernel trust")."""

    gpu_model: str
    capabilities: tuple[str, ...] = ()

    def refusal(self, gpu_model: str, kernel_name: str, kernel_version: int | None, what: str) -> str | None:
        """Why this worker must not measure ``what`` (None: it may)."""
        if gpu_model != self.gpu_model:
            return f"{what} is for GPU model {gpu_model!r}; this worker measures {self.gpu_model!r}"
        try:
            requires = get_kernel(kernel_name, kernel_version).requires
        except (NotFound, InvalidInput):  # unknown, or a stored version that no longer builds
            return None  # the backend reports it as the trial's own failure
        lacking = missing(requires, self.capabilities)
        if lacking:
            return f"{what}'s kernel {kernel_name!r} needs {', '.join(lacking)}, which this worker does not have"
        return None


def trial_refusal(trial_id: int, serves: Serves) -> str | None:
    """Why this worker must not take trial ``trial_id`` (None: it may, or there is no such trial, which
    the claim then skips). A trial's GPU model and kernel never change, so this read needs no lock."""
    with session_scope() as session:
        row = session.execute(
            select(Trial.gpu_model, Job.kernel_name, Kernel.version)
            .join(Job, Job.id == Trial.job_id)
            .join(Kernel, Kernel.id == Job.kernel_id)
            .where(Trial.id == trial_id)
        ).one_or_none()
    if row is None:
        return None
    return serves.refusal(row.gpu_model, row.kernel_name, row.version, f"trial {trial_id}")


def job_refusal(job_id: uuid.UUID, serves: Serves | None) -> str | None:
    """Why this worker must not profile trials of job ``job_id`` (with ``serves`` None, only whether
    there is such a job)."""
    with session_scope() as session:
        row = session.execute(
            select(Job.gpu_model, Job.kernel_name, Kernel.version)
            .join(Kernel, Kernel.id == Job.kernel_id)
            .where(Job.id == job_id)
        ).one_or_none()
    if row is None:
        return f"there is no job {job_id}"
    if serves is None:
        return None
    return serves.refusal(row.gpu_model, row.kernel_name, row.version, f"job {job_id}")


@dataclass(frozen=True)
class _Context:
    """What every trial a worker runs needs besides its own claim."""

    backend: Backend
    worker_name: str
    gpu_uuid: str | None
    heartbeat_seconds: float
    request_next_step: Callable[[uuid.UUID], None]
    soft_time_limit: float | None
    hard_time_limit: float | None
    compile_ahead: int
    measure_batch: int = 1


@dataclass(frozen=True)
class _Claimed:
    """A trial this worker holds: its claim, what to measure, and the lease kept alive meanwhile."""

    claim: trial_store.Claim
    request: MeasureRequest
    lease: LeaseKeeper


def evaluate(
    trial_id: int,
    backend: Backend,
    worker_name: str,
    gpu_uuid: str | None,
    heartbeat_seconds: float,
    request_next_step: Callable[[uuid.UUID], None],
    *,
    soft_time_limit: float | None = None,
    hard_time_limit: float | None = None,
    compile_ahead: int = 0,
    measure_batch: int = 1,
    serves: Serves | None = None,
) -> Outcome:
    """Run the trial this worker was sent. With ``compile_ahead`` > 0, also compile that many of the
    job's next queued trials ahead and, while this one still compiles, measure those that are
    compiled already.
    With ``measure_batch`` > 1, go on with up to that many trials in all, each claimed while the
    one before it is measured (see the module docstring).
    With ``serves``, a trial of another GPU model, or whose kernel needs what this worker lacks, is
    refused before any claim (it stays queued for its own workers; see :class:`Serves`).

    Returns:
        The outcome of the trial this worker was sent.
    """
    context = _Context(backend, worker_name, gpu_uuid, heartbeat_seconds, request_next_step,
                       soft_time_limit, hard_time_limit, compile_ahead, measure_batch)  # fmt: skip
    if serves is not None:
        reason = with_db_retry(f"route of trial {trial_id}", lambda: trial_refusal(trial_id, serves))
        if reason is not None:
            logger.warning("refused trial %s: %s; left queued for the workers it is routed to", trial_id, reason)
            return Outcome(trial_id, "refused")
    return _run_trial(trial_id, context)


def _claim(trial_id: int, worker_name: str, gpu_uuid: str | None) -> trial_store.Claim | None:
    with session_scope() as session:
        return trial_store.claim(session, trial_id, worker_name, gpu_uuid)


def _record(claim: trial_store.Claim, measurement: Measurement) -> bool:
    with session_scope() as session:
        return trial_store.record_result(session, claim.trial_id, claim.attempt, measurement)


def _claim_with_retry(trial_id: int, ctx: _Context) -> trial_store.Claim | None:
    return with_db_retry(f"claim trial {trial_id}", lambda: _claim(trial_id, ctx.worker_name, ctx.gpu_uuid))


def _request_of(claim: trial_store.Claim) -> MeasureRequest:
    return measure_request(
        trial_id=claim.trial_id,
        kernel_name=claim.kernel_name,
        problem=claim.problem,
        config=claim.config,
        job_seed=claim.seed,
        kernel_version=claim.kernel_version,
        energy=measures_energy(claim.objective),
        # Profiles are taken later, in batches (tuner/profiling.py): one ncu process per trial
        # would cost seconds of start-up each.
        profile=False,
    )


def _run_trial(trial_id: int, ctx: _Context) -> Outcome:
    claim = _claim_with_retry(trial_id, ctx)
    if claim is None:
        logger.info("trial %s is not claimable (duplicate delivery, finished or cancelled); skipped", trial_id)
        return Outcome(trial_id, "skipped")
    request = _request_of(claim)
    outcomes: list[Outcome] = []
    # Leases are kept through the write too: a write retried across a database restart must not
    # find its lease reaped merely because the heartbeats stopped when the measurement ended.
    with contextlib.ExitStack() as leases:
        sent = _Claimed(claim, request, leases.enter_context(LeaseKeeper(claim.trial_id, claim.attempt,
                                                                          ctx.heartbeat_seconds)))  # fmt: skip
        if ctx.compile_ahead:
            queue = CompiledQueue(ctx.backend, claim.job_id, ctx.compile_ahead,
                                  functools.partial(_claim_with_retry, ctx=ctx))  # fmt: skip
            queue.read()  # hands the job's queued trials to the compiler now
            outcomes += _fill_compile_wait(sent, queue, leases, ctx)
            more = _compiled_claims(queue, leases, ctx, ctx.measure_batch - 1, leave_last=True)
        else:
            more = iter(())
        outcomes += _measure_and_record(itertools.chain([sent], more), ctx)
    if len(outcomes) > 1:
        logger.info("measured %d more compiled trial(s) of job %s with trial %s", len(outcomes) - 1, claim.job_id,
                    trial_id)  # fmt: skip
    return next(o for o in outcomes if o.trial_id == trial_id)


# While the sent trial compiles: how often to look whether it (or a queued one) is compiled.
READY_POLL_SECONDS = 0.02


def _fill_compile_wait(sent: _Claimed, queue: CompiledQueue, leases: contextlib.ExitStack,
                       ctx: _Context) -> list[Outcome]:  # fmt: skip
    """Keep the GPU busy while the sent trial compiles: claim and measure the job's queued trials
    whose kernels are compiled already, back to back (a slow NVRTC run must not idle the GPU while
    others are ready). Each is an ordinary trial (claim, lease, conditional write); its own message
    is skipped later as not claimable. Bounded by half the soft time limit, so the sent trial's
    lease and message stay well inside their timeouts."""
    ctx.backend.prepare([sent.request])
    deadline = time.monotonic() + (ctx.soft_time_limit or 600.0) / 2

    def waiting() -> bool:
        return not ctx.backend.ready(sent.request) and time.monotonic() < deadline

    outcomes: list[Outcome] = []
    while waiting():
        # The stream ends when nothing compiled is left to claim: results are then all stored
        # (the coordinator needs them to propose more) before this polls again.
        done = _measure_and_record(_compiled_claims(queue, leases, ctx, None, leave_last=False, until=waiting), ctx)
        outcomes += done
        if not done:
            time.sleep(READY_POLL_SECONDS)
    return outcomes


def _compiled_claims(queue: CompiledQueue, leases: contextlib.ExitStack, ctx: _Context, limit: int | None,
                     leave_last: bool, until: Callable[[], bool] | None = None) -> Iterator[_Claimed]:  # fmt: skip
    """Up to ``limit`` (None: any number) compiled trials of the job, each claimed (and its lease
    started) only when the measuring stream asks for the next one; stops when none is claimable,
    when ``until`` says so, or when the task has run for half its soft time limit (its message
    must not outlive its timeout)."""
    deadline = time.monotonic() + (ctx.soft_time_limit or 600.0) / 2
    count = 0
    while (limit is None or count < limit) and time.monotonic() < deadline and (until is None or until()):
        claim = queue.claim(leave_last)
        if claim is None:
            return
        lease = leases.enter_context(LeaseKeeper(claim.trial_id, claim.attempt, ctx.heartbeat_seconds))
        count += 1
        yield _Claimed(claim, _request_of(claim), lease)


def _measure_and_record(claimed: Iterator[_Claimed], ctx: _Context) -> list[Outcome]:
    """Measure the claimed trials in order and store each result as it arrives (the backend already
    measures the next one meanwhile). A soft time limit ends one measurement, recorded as a
    timeout; the trials after it go on in a fresh stream."""
    pulled: list[_Claimed] = []  # in the order the backend measures them

    def pairs() -> Iterator[tuple[MeasureRequest, KeepAlive]]:
        for item in claimed:
            pulled.append(item)
            yield item.request, item.lease.alive

    source = pairs()
    outcomes: list[Outcome] = []
    resend: list[tuple[MeasureRequest, KeepAlive]] = []
    while True:
        stream = ctx.backend.measure_stream(itertools.chain(resend, source))
        while True:
            timed_out = False
            try:
                with TimeLimits(ctx.soft_time_limit, ctx.hard_time_limit):
                    measurement = next(stream)
            except StopIteration:
                return outcomes
            except SoftTimeLimitExceeded as exc:
                measurement, timed_out = Measurement.failed(FailureKind.TIMEOUT, str(exc)), True
            outcomes.append(_store(pulled[len(outcomes)], measurement, ctx))
            if timed_out:  # the stream ended with the exception; what it had pulled starts again
                resend = [(item.request, item.lease.alive) for item in pulled[len(outcomes) :]]
                break


def _store(item: _Claimed, measurement: Measurement, ctx: _Context) -> Outcome:
    """Write one result (conditional on the lease) and ask the coordinator for the next step."""
    claim = item.claim
    written = with_db_retry(f"record trial {claim.trial_id}", lambda: _record(claim, measurement))
    if not written:
        logger.warning("trial %s attempt %s lost its lease; result discarded", claim.trial_id, claim.attempt)
    try:
        ctx.request_next_step(claim.job_id)
    except Exception:  # broker down: the result is stored; the coordinator's housekeeping steps the job
        logger.warning("could not request the next step of job %s; housekeeping will", claim.job_id, exc_info=True)
    return Outcome(claim.trial_id, "recorded" if written else "stale", claim.job_id)
