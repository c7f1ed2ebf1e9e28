"""Celery tasks of the coordinator (queue "tuner"). Thin: the logic is in coordinator.py.

Start: ``kernelfarm coordinator`` (a Celery worker on queue "tuner" with an embedded beat that runs
housekeeping every ``reap_interval_seconds``).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from celery.signals import beat_init, worker_init

from kernelfarm.core.advance_requests import broker_was_emptied, step_begins
from kernelfarm.core.celery_app import (
    ADVANCE_TASK,
    EVALUATE_TASK,
    HOUSEKEEPING_TASK,
    PRESENCE_SWEEP_TASK,
    PROFILE_TASK,
    TUNER_QUEUE,
    make_celery,
)
from kernelfarm.core.dead_deliveries import CLAIM_GRACE_S, Delivery, restore, taken_deliveries
from kernelfarm.core.gpu import queue_for
from kernelfarm.core.metrics import COORDINATOR_STEP_SECONDS
from kernelfarm.core.settings import Settings, get_settings
from kernelfarm.core.standby import wait_at_gate
from kernelfarm.kernels.registry import all_kernels

if TYPE_CHECKING:  # types only: the module itself is imported on first use (see _coordinator)
    from kernelfarm.tuner.coordinator import Dispatch, DispatchProfiles, Housekeeping, StepResult

logger = logging.getLogger(__name__)
settings = get_settings()
app = make_celery(settings)
app.conf.beat_schedule = {
    "housekeeping": {"task": HOUSEKEEPING_TASK, "schedule": settings.reap_interval_seconds,
                     "options": {"queue": TUNER_QUEUE, "expires": settings.reap_interval_seconds * 2}},
}  # fmt: skip
if settings.presence_sweep_seconds > 0:
    app.conf.beat_schedule["presence sweep"] = {
        "task": PRESENCE_SWEEP_TASK, "schedule": settings.presence_sweep_seconds,
        "options": {"queue": TUNER_QUEUE, "expires": settings.presence_sweep_seconds * 2},
    }  # fmt: skip


class CoordinatorSteps(Protocol):
    """What the tasks call in tuner/coordinator.py; the module itself satisfies it (mypy checks the
    module against it in :func:`_coordinator`, and every call through it)."""

    def advance(
        self, job_id: uuid.UUID | str, settings: Settings, dispatch: Dispatch,
        dispatch_profiles: DispatchProfiles | None = None,
    ) -> StepResult: ...  # fmt: skip

    def housekeeping(self, settings: Settings, broker_emptied: bool = False) -> Housekeeping: ...

    def sweep_gone_workers(self, settings: Settings) -> tuple[list[str], list[tuple[int, str]]]: ...

    def unclaimed_deliveries(self, deliveries: Sequence[Delivery]) -> list[str]: ...

    def workers_gone_within(self, seconds: float) -> bool: ...


def _coordinator() -> CoordinatorSteps:
    """tuner/coordinator.py, imported on first use: it brings the strategies (scikit-optimize, SciPy:
    ~1.4 s of a ~1.9 s import), which the scheduler (beat, the coordinator's other process, which
    imports this module for its schedule) never needs. Starting both at once, it slowed the restart
    of a killed coordinator on a loaded 2-core machine (10-16 s, in which no job was stepped)."""
    from kernelfarm.tuner import coordinator

    return coordinator


@worker_init.connect
def _load_kernel_catalogue(**_: Any) -> None:
    """Load and validate the kernel specs and the coordinator once, in the main process before it
    forks its pool: otherwise each pool process's first step of a job paid for them (~0.25 s for
    the catalogue alone)."""
    all_kernels()
    _coordinator()
    wait_at_gate(settings)  # a warm spare (core/standby.py) waits here, before it consumes


@beat_init.connect
def _scheduler_waits_as_a_spare(**_: Any) -> None:
    """A spare coordinator's scheduler waits before it opens its schedule or sends anything: one
    scheduler per stack ticks, the serving coordinator's (core/standby.py)."""
    wait_at_gate(settings)


def dispatch_trial(trial_id: int, gpu_model: str) -> None:
    app.send_task(EVALUATE_TASK, args=[trial_id], queue=queue_for(gpu_model))


def dispatch_profiles(job_id: uuid.UUID, trial_ids: list[int], gpu_model: str) -> None:
    app.send_task(PROFILE_TASK, args=[str(job_id), trial_ids], queue=queue_for(gpu_model))


@worker_init.connect
def _no_restore_through_a_lost_connection(**_: Any) -> None:
    """The coordinator does not push its unacknowledged messages back when its broker connection
    closes. With kombu's own Redis transports, closing a lost connection restored them through it and
    kombu failed there (AttributeError on the connection's hostname, the class of celery/kombu#582):
    Celery called that unrecoverable, and the coordinator exited (7 of 13 CI-scale fault runs at
    1f39b20 lost it for 6-8 s at the Redis restart; docs/RELIABILITY.md). ``redis://`` brokers now go
    through core/broker_transport.py, which turns that failure into a reconnection; this is the fix
    for the coordinator on every Redis broker, ``rediss://`` and ``sentinel://`` included, which keep
    kombu's transports. Nothing of the coordinator's needs the restore: housekeeping steps every
    unfinished job every tick, and a message left unacknowledged in Redis comes back after the
    visibility timeout anyway (a duplicate step is harmless). The GPU workers, whose trial messages
    matter more, keep the default. tests/reliability/test_coordinator_broker_loss.py tests each fix alone."""
    from kombu.transport import redis as kombu_redis

    kombu_redis.QoS.restore_at_shutdown = False


# Acknowledged on receipt, as housekeeping is: a step lost with its coordinator costs nothing (see
# above), and a message acknowledged is one fewer to hold when the broker goes away.
@app.task(name=ADVANCE_TASK, acks_late=False, max_retries=None)
def advance(job_id: str) -> dict[str, object]:
    step_begins(app, job_id)  # before the step reads the job: requests from now on are sent
    started = time.perf_counter()
    outcome = "error"
    try:
        result = _coordinator().advance(job_id, settings, dispatch_trial, dispatch_profiles)
        outcome = "ok"
    except Exception as exc:
        # Imported here, like the coordinator: it brings the ORM models, +0.24 s to the scheduler's start
        from kernelfarm.tuner.step_failures import step_failed

        step_failed(job_id, exc, settings)
        raise  # logged by Celery, with its traceback
    finally:
        COORDINATOR_STEP_SECONDS.labels(outcome).observe(time.perf_counter() - started)
    return {"dispatched": len(result.dispatched), "state": result.state}


@app.task(name=HOUSEKEEPING_TASK, acks_late=False)
def housekeeping() -> dict[str, int]:
    report = _coordinator().housekeeping(settings, broker_emptied=broker_was_emptied(app))
    for trial_id, model in [*report.requeued, *report.redispatched]:
        dispatch_trial(trial_id, model)
    for lost_job, model, trial_ids in report.profile_batches:
        dispatch_profiles(lost_job, trial_ids, model)
    if report.gone_workers or _restore_due(settings.reap_interval_seconds):
        _restore_dead_deliveries()
    for job_id in report.jobs_to_advance:
        # Expiring: while the coordinator is down these would pile up, one per job per round.
        app.send_task(ADVANCE_TASK, args=[str(job_id)], queue=TUNER_QUEUE, expires=settings.reap_interval_seconds * 5)
    return {"requeued": len(report.requeued), "redispatched": len(report.redispatched)}


@app.task(name=PRESENCE_SWEEP_TASK, acks_late=False)
def presence_sweep() -> dict[str, int]:
    gone, requeued = _coordinator().sweep_gone_workers(settings)
    for trial_id, route in requeued:
        dispatch_trial(trial_id, route)
    restored = _restore_dead_deliveries() if gone or _restore_due(settings.presence_sweep_seconds) else 0
    return {"requeued": len(requeued), "restored": restored}


def _restore_due(period_s: float) -> bool:
    """A worker found gone less than the claim grace and two periods ago: a message it took just
    before it died was too young to tell from a live worker's then (core/dead_deliveries.py), and is
    not any more. Looking only when a worker was found gone left such a message to the re-send of
    unclaimed work (30 s): a fault run's last profile batch waited 28 s so (docs/RELIABILITY.md)."""
    return _coordinator().workers_gone_within(CLAIM_GRACE_S + 2 * period_s)


def _restore_dead_deliveries() -> int:
    """Messages the gone workers had taken without claiming their work go back to their queues now
    (core/dead_deliveries.py). Best effort: without it they come back after redispatch_after_seconds."""
    try:
        tags = _coordinator().unclaimed_deliveries(taken_deliveries(app))
        restore(app, tags)
    except Exception:
        logger.warning("could not restore the messages of gone workers", exc_info=True)
        return 0
    return len(tags)
