"""At most one pending coordinator step per job, and noticing a broker that lost its data.

Every finished trial asks the coordinator to step its job (``tuner.advance``). A step of a job with
a long history takes about a second (the Bayesian ask), so a wide job finishing trials faster than
that filled the tuner queue with hundreds of requests for itself, and a new job's first step waited
behind all of them: a 20-trial job sat 40 s in "queued: waiting for the coordinator" beside a
`parallelism: 8` job. Requests are now coalesced: a sender skips sending while a request for the
job is pending (sent, and its step not yet begun), which a Redis key marks. The coordinator deletes
the key when a step *begins*, before it reads the job's history, so a trial that finished while a
request was pending is seen by that request's step: nothing is missed.

The key expires after ``PENDING_SECONDS`` (a request lost with its key still set delays the job at
most that long; the coordinator's housekeeping steps every unfinished job every few seconds anyway).
If Redis cannot be asked, the request is sent (as before).
"""

from __future__ import annotations

import logging
from functools import lru_cache

import redis
from celery import Celery

from kernelfarm.core.celery_app import ADVANCE_TASK, TUNER_QUEUE

logger = logging.getLogger(__name__)

PENDING_SECONDS = 30
_PREFIX = "kernelfarm:advance-pending:"


@lru_cache(maxsize=8)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


def _broker(celery: Celery) -> redis.Redis:
    return _client(str(celery.conf.broker_url))


def request_advance(celery: Celery, job_id: str) -> bool:
    """Ask the coordinator to step ``job_id`` unless a request is already pending.

    Returns:
        Whether a message was sent.
    """
    try:
        first = _broker(celery).set(_PREFIX + job_id, 1, nx=True, ex=PENDING_SECONDS)
    except redis.RedisError:
        logger.debug("advance coalescing unavailable; sending", exc_info=True)
        first = True
    if first:
        celery.send_task(ADVANCE_TASK, args=[job_id], queue=TUNER_QUEUE)
    return bool(first)


def step_begins(celery: Celery, job_id: str) -> None:
    """Called by the coordinator before a step reads the job: later requests must be sent."""
    try:
        _broker(celery).delete(_PREFIX + job_id)
    except redis.RedisError:
        logger.debug("could not clear the pending advance of %s", job_id, exc_info=True)


# Set once and never expired: its absence means the broker lost everything it held.
_SENTINEL = "kernelfarm:broker-holds-data"


def broker_was_emptied(celery: Celery) -> bool:
    """Whether the broker lost its data (flushed, or restarted without persistence) since the last
    call; also True on the first call against a broker. Every queued trial's and profile batch's
    message may then be gone: the coordinator re-sends them at once instead of waiting
    ``redispatch_after_seconds`` (a duplicate message is harmless: claims succeed once).
    """
    try:
        return bool(_broker(celery).set(_SENTINEL, 1, nx=True))
    except redis.RedisError:
        return False  # the broker is down: nothing can be re-sent now anyway
