"""The Celery application shared by the API (send only), the coordinator and the workers.

Settings chosen for long, must-not-be-lost tasks:
- ``task_acks_late`` + ``task_reject_on_worker_lost``: a message is acknowledged only after its
  task ran, and goes back to the queue if the worker process dies mid-task.
- ``worker_prefetch_multiplier=1``: a worker holds one trial at a time; nothing waits behind a
  slow measurement while another GPU idles.
- soft/hard time limits per trial, and a Redis ``visibility_timeout`` above the hard limit, so
  Redis never redelivers a task that is still legitimately running.
- the solo pool (one process per GPU) ignores Celery's time limits, so worker/time_limits.py enforces
  the same two values itself; they are kept in the Celery config for any other pool.
- ``redis://`` brokers go through core/broker_transport.py: kombu's Redis transport, except that a
  Redis restart is a lost connection to reconnect, never the AttributeError that made the coordinator
  exit (celery/kombu#582's class).
:func:`check_timing_invariants` refuses settings that would break these promises.
Postgres stays the source of truth: messages carry ids only, and duplicates are harmless.
"""

from __future__ import annotations

from celery import Celery

from kernelfarm.core.settings import Settings, get_settings

ADVANCE_TASK = "tuner.advance"
HOUSEKEEPING_TASK = "tuner.housekeeping"
PRESENCE_SWEEP_TASK = "tuner.presence_sweep"
EVALUATE_TASK = "worker.evaluate"
PROFILE_TASK = "worker.profile"
TUNER_QUEUE = "tuner"
# Named, not imported: kombu imports it on the first connection (the API imports this module too).
REDIS_TRANSPORT = "kernelfarm.core.broker_transport:Transport"


def check_timing_invariants(settings: Settings) -> None:
    """Fail fast on timings that would make the farm lose or duplicate work.

    Raises:
        ValueError: soft limit >= hard limit (the soft one would never fire); visibility timeout
            <= hard limit (Redis would hand a still-running trial to a second worker); lease <=
            heartbeat interval (every live trial would be reaped between two heartbeats).
    """
    if not 0 < settings.trial_soft_time_limit < settings.trial_hard_time_limit:
        raise ValueError("trial_soft_time_limit must be positive and below trial_hard_time_limit")
    if settings.visibility_timeout <= settings.trial_hard_time_limit:
        raise ValueError("visibility_timeout must exceed trial_hard_time_limit, or Redis redelivers running trials")
    if settings.lease_seconds <= settings.heartbeat_seconds:
        raise ValueError("lease_seconds must exceed heartbeat_seconds, or live trials get reaped")


def make_celery(settings: Settings | None = None) -> Celery:
    settings = settings or get_settings()
    check_timing_invariants(settings)
    broker = settings.require_redis_url()
    app = Celery("kernelfarm", broker=broker, backend=None)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_soft_time_limit=settings.trial_soft_time_limit,
        task_time_limit=settings.trial_hard_time_limit,
        broker_transport_options={"visibility_timeout": settings.visibility_timeout},
        broker_connection_retry_on_startup=True,
        # rediss:// and sentinel:// keep kombu's own transports (their TLS and discovery set-up)
        broker_transport=REDIS_TRANSPORT if broker.startswith("redis://") else None,
        task_default_queue=TUNER_QUEUE,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        broker_pool_limit=4,
    )
    return app
