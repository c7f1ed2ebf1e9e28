"""Messages a GPU worker took from its queue and died holding before it claimed their work: back to
their queue as soon as the worker is found gone, not when Redis's visibility timeout (15 min) or the
coordinator's re-send of work nobody claimed (``redispatch_after_seconds``, 30 s) brings them back.

kombu's Redis transport keeps every delivered, unacknowledged message in the hash ``unacked`` (by
delivery tag) and its delivery time in the sorted set ``unacked_index``. A worker claims the trial or
the profile batch a message carries first thing in the task (worker/tasks.py), and holds one message
at a time (``acks_late``, prefetch 1); so a message delivered more than :data:`CLAIM_GRACE_S` ago whose
trial is still queued, or whose profile requests are all unclaimed, is held by a worker that died
between taking it and claiming it (seen: 16 profile requests of a fault run waited 18 s for the re-send
after the job's last trial; docs/RELIABILITY.md). A live worker that is merely slow to claim gets a
duplicate, which is harmless: every claim is a conditional UPDATE that one delivery wins.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from celery import Celery

from kernelfarm.core.celery_app import EVALUATE_TASK, PROFILE_TASK

logger = logging.getLogger(__name__)

# A live worker claims within milliseconds of the delivery; seconds leave room for a loaded machine.
CLAIM_GRACE_S = 2.0


@dataclass(frozen=True)
class Delivery:
    """A delivered, unacknowledged message of a GPU worker's task."""

    tag: str
    task: str
    args: list[Any]


def _parse(tag: str, raw: bytes) -> Delivery | None:
    try:
        payload = json.loads(raw)[0]
        task = payload["headers"]["task"]
        body = payload["body"]
        if payload.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
    except (ValueError, KeyError, IndexError, TypeError):
        return None  # not a message of the farm's protocol: left to the visibility timeout
    # Only the farm's own argument shapes (worker/tasks.py): a foreign or malformed message is left to
    # the visibility timeout instead of failing the restore of every other one.
    well_formed = isinstance(args, list) and (
        (task == EVALUATE_TASK and len(args) == 1 and _is_id(args[0]))
        or (task == PROFILE_TASK and len(args) == 2 and isinstance(args[1], list) and all(map(_is_id, args[1])))
    )
    return Delivery(tag, task, args) if well_formed else None


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def taken_deliveries(app: Celery, grace_s: float = CLAIM_GRACE_S) -> list[Delivery]:
    """GPU workers' messages delivered over ``grace_s`` ago and not yet acknowledged."""
    with app.connection_for_write() as connection:
        channel: Any = connection.default_channel
        with channel.conn_or_acquire() as client:
            tags = [t.decode() for t in client.zrangebyscore(channel.unacked_index_key, 0, time.time() - grace_s)]
            raws = client.hmget(channel.unacked_key, tags) if tags else []
    return [d for tag, raw in zip(tags, raws, strict=True) if raw and (d := _parse(tag, raw))]


def restore(app: Celery, tags: list[str]) -> None:
    """Put these deliveries back at the head of their queues (kombu's own restore: atomic per tag)."""
    if not tags:
        return
    with app.connection_for_write() as connection:
        qos = connection.default_channel.qos
        for tag in tags:
            qos.restore_by_tag(tag, leftmost=True)
    logger.warning("restored %d message(s) a gone worker had taken and not claimed", len(tags))
