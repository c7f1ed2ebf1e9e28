"""core/dead_deliveries.py reads kombu's unacknowledged messages: only the farm's own task messages,
with the argument shapes worker/tasks.py gives them, count; anything else is left alone rather than
failing the restore of every other message."""

from __future__ import annotations

import base64
import json
from typing import Any

from kernelfarm.core.celery_app import ADVANCE_TASK, EVALUATE_TASK, PROFILE_TASK
from kernelfarm.core.dead_deliveries import Delivery, _parse


def unacked_entry(task: str, args: Any, base64_body: bool = True) -> bytes:
    """What kombu's Redis transport stores in its ``unacked`` hash: [payload, exchange, routing key]."""
    body = json.dumps([args, {}, {"callbacks": None}]).encode()
    payload = {
        "headers": {"task": task, "id": "x"},
        "body": base64.b64encode(body).decode() if base64_body else body.decode(),
        "properties": {"body_encoding": "base64" if base64_body else "utf-8", "delivery_tag": "t"},
    }
    return json.dumps([payload, "", "gpu.q"]).encode()


def test_the_farms_task_messages_are_read() -> None:
    assert _parse("t", unacked_entry(EVALUATE_TASK, [7])) == Delivery("t", EVALUATE_TASK, [7])
    assert _parse("t", unacked_entry(EVALUATE_TASK, [7], base64_body=False)) == Delivery("t", EVALUATE_TASK, [7])
    job = "0b5e3f0e-0000-4000-8000-000000000000"
    assert _parse("t", unacked_entry(PROFILE_TASK, [job, [1, 2]])) == Delivery("t", PROFILE_TASK, [job, [1, 2]])


def test_anything_else_is_left_alone() -> None:
    for entry in (
        unacked_entry(ADVANCE_TASK, ["a-job"]),  # the coordinator's, not a GPU worker's
        unacked_entry(EVALUATE_TASK, ["7"]),
        unacked_entry(EVALUATE_TASK, [True]),
        unacked_entry(EVALUATE_TASK, [1, 2]),
        unacked_entry(EVALUATE_TASK, {"trial": 1}),
        unacked_entry(PROFILE_TASK, ["job", [1, "2"]]),
        unacked_entry(PROFILE_TASK, ["job"]),
        b"\xff not json",
        json.dumps([{"headers": {}}, "", ""]).encode(),
    ):
        assert _parse("t", entry) is None, entry
