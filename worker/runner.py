"""One trial on one worker: claim (lease) → measure → write the result (conditional on the
attempt) → ask the coordinator for the next step.

The hardware is injected (a Backend), so this runs the same with the cuda and replay backends.
While the backend measures, a heartbeat thread keeps the lease alive with the database clock; if
the lease is lost (reaped, job cancelled) the measurement is discarded by the conditional write.

With ``measure_batch`` > 1 the worker does not stop at the trial it was sent: while the GPU
measures it, the worker claims the job's next queued trial that is compiled already, and the
backend queues that one on the GPU before the first result is written. So the result write, the
next-step request and the next claim happen while the GPU measures, not between measurements. A
worker holds at most two such trials at a time (plus, while it fills a compile wait, the sent trial
that still compiles); the claimed trials' own messages are skipped later as not claimable.

Time limits are enforced here, not by Celery: the worker runs Celery's solo pool (one process per
GPU, no fork), and the solo pool ignores ``task_soft_time_limit``/``task_time_limit``. The soft
limit raises :class:`SoftTimeLimitExceeded` in the measuring (main) thread and the trial is
recorded as failed with kind "timeout"; the hard limit is for a backend stuck where Python cannot
interrupt it (a hung driver call): the process exits, the unacknowledged message stays in the
broker, and the reaper retries the trial up to the retry cap.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import math
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import TypeVar

from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy.exc import DBAPIError

from kernelfarm.core.db import session_scope
from kernelfarm.core.measurement import Measurement
from kernelfarm.core.states import FailureKind
from kernelfarm.core.store import trials as trial_store
from kernelfarm.worker.backends.base import Backend, KeepAlive, MeasureRequest
from kernelfarm.worker.lookahead import QueuedTrial, queued_trials, request_seed

logger = logging.getLogger(__name__)

T = TypeVar("T")
# How long a worker keeps retrying a database write through an outage (e.g. a Postgres restart).
# Giving up earlier would throw away a finished measurement and burn one of the trial's attempts.
DB_RETRY_SECONDS = 60.0
HARD_LIMIT_EXIT_CODE = 70


@dataclass(frozen=True)
class Outcome:
    trial_id: int
    status: str  # "recorded" | "skipped" (not claimable) | "stale" (lease lost before the write)
    job_id: uuid.UUID | None = None


class LeaseKeeper:
    """Heartbeats a trial's lease from a background thread until stopped."""

    def __init__(self, trial_id: int, attempt: int, interval: float) -> None:
        self.trial_id, self.attempt, self.interval = trial_id, attempt, interval
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{trial_id}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def alive(self) -> bool:
        return not self.lost

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                with session_scope() as session:
                    if not trial_store.heartbeat(session, self.trial_id, self.attempt):
                        self.lost = True
                        return
            except Exception:  # database briefly unreachable: keep trying, the lease has slack
                logger.warning("heartbeat for trial %s failed; retrying", self.trial_id, exc_info=True)


class TimeLimits:
    """Soft and hard time limits around one measurement (see the module docstring).

    The soft limit needs the main thread (signals are delivered there), which is where the solo
    pool runs tasks; elsewhere (tests calling evaluate from a thread) only the hard limit applies.
    """

    def __init__(self, soft_seconds: float | None, hard_seconds: float | None) -> None:
        self.soft, self.hard = soft_seconds, hard_seconds
        self._timer: threading.Timer | None = None
        self._previous: object = None
        self._outer_timer = 0.0  # an ITIMER_REAL someone else armed (pytest-timeout): restored on exit
        self._armed_at = 0.0
        self._armed = False

    def __enter__(self) -> TimeLimits:
        if self.soft and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGALRM, self._on_soft_limit)
            self._outer_timer = signal.setitimer(signal.ITIMER_REAL, self.soft)[0]
            self._armed_at = time.monotonic()
            self._armed = True
        if self.hard:
            self._timer = threading.Timer(self.hard, self._on_hard_limit)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)  # type: ignore[arg-type]
            if self._outer_timer > 0:
                remaining = self._outer_timer - (time.monotonic() - self._armed_at)
                signal.setitimer(signal.ITIMER_REAL, max(remaining, 0.001))
        if self._timer is not None:
            self._timer.cancel()

    def _on_soft_limit(self, signum: int, frame: FrameType | None) -> None:
        raise SoftTimeLimitExceeded(f"soft time limit ({self.soft:g} s) exceeded")

    def _on_hard_limit(self) -> None:
        logger.critical("hard time limit (%s s) exceeded: the measurement is stuck; exiting the worker", self.hard)
        logging.shutdown()
        os._exit(HARD_LIMIT_EXIT_CODE)


def with_db_retry(what: str, action: Callable[[], T], deadline_seconds: float = DB_RETRY_SECONDS) -> T:
    """Run a database action, retrying connection-level failures (a Postgres restart) with backoff.

    Only DBAPI errors are retried; each attempt is its own transaction, and every write this module
    makes is conditional on the lease, so running one twice is harmless.
    """
    deadline = time.monotonic() + deadline_seconds
    delay = 0.2
    while True:
        try:
            return action()
        except DBAPIError:
            if time.monotonic() + delay > deadline:
                raise
            logger.warning("%s: database unavailable; retrying in %.1f s", what, delay, exc_info=True)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


def _claim(trial_id: int, worker_name: str, gpu_uuid: str | None) -> trial_store.Claim | None:
    with session_scope() as session:
        return trial_store.claim(session, trial_id, worker_name, gpu_uuid)


def _record(claim: trial_store.Claim, measurement: Measurement) -> bool:
    with session_scope() as session:
        return trial_store.record_result(session, claim.trial_id, claim.attempt, measurement)


def _queued(job_id: uuid.UUID, limit: int) -> list[QueuedTrial]:
    with session_scope() as session:
        return queued_trials(session, job_id, limit)


def _compile_ahead(backend: Backend, job_id: uuid.UUID, lookahead: int) -> list[QueuedTrial]:
    """Hand the job's next queued trials to the backend so it compiles them while this one is
    measured. Best effort: a failure here only costs the head start."""
    try:
        upcoming = _queued(job_id, lookahead)
        backend.prepare([q.request for q in upcoming])
        return upcoming
    except Exception:
        logger.warning("compile-ahead for job %s failed; continuing", job_id, exc_info=True)
        return []


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
    lookahead: int
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
    lookahead: int = 0,
    measure_batch: int = 1,
) -> Outcome:
    """Run the trial this worker was sent. With ``lookahead``, also compile the job's next queued
    trials ahead and, while this one still compiles, measure those that are compiled already.
    With ``measure_batch`` > 1, go on with up to that many trials in all, each claimed while the
    one before it is measured (see the module docstring).

    Returns:
        The outcome of the trial this worker was sent.
    """
    context = _Context(backend, worker_name, gpu_uuid, heartbeat_seconds, request_next_step,
                       soft_time_limit, hard_time_limit, lookahead, measure_batch)  # fmt: skip
    return _run_trial(trial_id, context)


def _request_of(claim: trial_store.Claim) -> MeasureRequest:
    return MeasureRequest(
        kernel_name=claim.kernel_name,
        problem=claim.problem,
        config=claim.config,
        # Profiles are taken later, in batches (tuner/profiling.py): one ncu process per trial
        # would cost seconds of start-up each.
        profile=False,
        seed=request_seed(claim.seed, claim.trial_id),
    )


def _run_trial(trial_id: int, ctx: _Context) -> Outcome:
    claim = with_db_retry(f"claim trial {trial_id}", lambda: _claim(trial_id, ctx.worker_name, ctx.gpu_uuid))
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
        if ctx.lookahead:
            queue = _CompiledQueue(claim.job_id, ctx)
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


# While the sent trial compiles: how often to look whether it (or a queued one) is compiled, and
# how often to read the job's queue again (and hand newly queued trials to the compiler).
READY_POLL_SECONDS = 0.02
QUEUE_REFRESH_SECONDS = 0.5
# ... and, when nothing in the last read can be claimed, how soon to read it again.
QUEUE_REREAD_SECONDS = 0.05


class _CompiledQueue:
    """The job's queued trials as last read from the database (read again when older than
    QUEUE_REFRESH_SECONDS), each read handing them to the backend to compile ahead."""

    def __init__(self, job_id: uuid.UUID, ctx: _Context) -> None:
        self.job_id, self.ctx = job_id, ctx
        self.items: list[QueuedTrial] = []
        self.read_at = -math.inf

    def read(self) -> None:
        self.items = _compile_ahead(self.ctx.backend, self.job_id, self.ctx.lookahead)
        self.read_at = time.monotonic()

    def claim(self, leave_last: bool) -> trial_store.Claim | None:
        """Claim the first queued trial whose kernel is compiled. None if there is none, if
        ``leave_last`` and it is the job's last queued trial (an idle worker should have it rather
        than wait for this worker's current measurement), or if the database is unreachable (only
        the head start is lost)."""
        try:
            if time.monotonic() - self.read_at > QUEUE_REFRESH_SECONDS:
                self.read()
            claim = self._claim_read(leave_last)
            if claim is None and time.monotonic() - self.read_at > QUEUE_REREAD_SECONDS:
                # What was read may be stale: other workers took it, or more got queued and compiled.
                self.read()
                claim = self._claim_read(leave_last)
            return claim
        except Exception:
            logger.warning("claiming a compiled trial of job %s failed; continuing", self.job_id, exc_info=True)
            return None

    def _claim_read(self, leave_last: bool) -> trial_store.Claim | None:
        while (compiled := next((q for q in self.items if self.ctx.backend.ready(q.request)), None)) is not None:
            if leave_last and len(self.items) < 2:
                return None
            self.items.remove(compiled)  # claimed now, or by someone else already
            take = functools.partial(_claim, compiled.trial_id, self.ctx.worker_name, self.ctx.gpu_uuid)
            claim = with_db_retry(f"claim trial {compiled.trial_id}", take)
            if claim is not None:
                return claim
        return None


def _fill_compile_wait(sent: _Claimed, queue: _CompiledQueue, leases: contextlib.ExitStack,
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


def _compiled_claims(queue: _CompiledQueue, leases: contextlib.ExitStack, ctx: _Context, limit: int | None,
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
