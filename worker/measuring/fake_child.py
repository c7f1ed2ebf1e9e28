"""A stand-in for the measuring child's main loop (no CUDA): hangs, dies or answers on request.

It tests the parent's supervision (:mod:`.supervisor`) and the pipelined stream (:mod:`.stream`) on
machines without a GPU. It lives in the package, not in tests/, because the child is a spawned
process: it imports its target by module name, and a spawned interpreter finds the installed package
but not a test folder.

What it does with a request is its ``fake`` field, else its ``op``: ``hang`` (never answers), ``die``
(exits without a reply), ``poison`` (replies with a crash that poisoned the context, then exits);
anything else is answered ``ok`` with the child's pid, and a ``measure`` request also with made-up
repetitions, as the real child's reply has them.
"""

from __future__ import annotations

import os
import time
from multiprocessing.connection import Connection
from typing import Any

from kernelfarm.worker.measuring.child import ChildConfig

FAKE_TIMES_MS = (1.0, 1.1, 0.9)


def serve(conn: Connection, config: ChildConfig) -> None:
    """Main loop with :func:`kernelfarm.worker.measuring.child.serve`'s signature."""
    conn.send({"status": "ready", "environment": {"pid": os.getpid()}})
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        op = message.get("op")
        act = message.get("fake", op)
        if op == "stop":
            return
        if act == "hang":
            time.sleep(3600)
        if act == "die":
            os._exit(3)
        if act == "poison":
            conn.send(
                {
                    "status": "failure",
                    "kind": "crash",
                    "message": "illegal address",
                    "poisoned": True,
                    "seq": message.get("seq"),
                }
            )
            return
        reply: dict[str, Any] = {"status": "ok", "pid": os.getpid(), "seq": message.get("seq")}
        if op == "measure":
            reply |= {"times_ms": list(FAKE_TIMES_MS), "gpu_s": 0.001, "child_s": 0.002, "resources": {"registers": 1}}
        conn.send(reply)
