"""A stand-in for the measuring child's main loop (no CUDA): hangs, dies or answers on request.

It tests the parent's supervision (:mod:`.supervisor`) and the pipelined stream (:mod:`.stream`) on
machines without a GPU. It lives in the package, not in tests/, because the child is a spawned
process: it imports its target by module name, and a spawned interpreter finds the installed package
but not a test folder.

What it does with a request is its ``fake`` field, else its ``op``: ``hang`` (never answers), ``die``
(exits without a reply), ``poison`` (replies with a crash that poisoned the context, then exits);
``spin`` (burns CPU: the per-request CPU limit ends it), ``python`` (runs the message's ``code`` and
answers its ``result`` variable: what an uploaded Python reference or a plugin kernel could do in the
real child); anything else is answered ``ok`` with the child's pid, and a ``measure`` request also
with made-up repetitions, as the real child's reply has them. It is confined as the real child is
(:mod:`.sandbox`), so tests see what user code in the real child would see.
"""

from __future__ import annotations

import os
import time
from multiprocessing.connection import Connection
from typing import Any

from kernelfarm.worker.measuring.child import ChildConfig
from kernelfarm.worker.measuring.sandbox import enter, limit_cpu_for_request

FAKE_TIMES_MS = (1.0, 1.1, 0.9)


def serve(conn: Connection, config: ChildConfig) -> None:
    """Main loop with :func:`kernelfarm.worker.measuring.child.serve`'s signature."""
    confinement = enter(config.limits)
    conn.send({"status": "ready", "environment": {"pid": os.getpid(), "sandbox": confinement}})
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        limit_cpu_for_request(config.limits)
        op = message.get("op")
        act = message.get("fake", op)
        if op == "stop":
            return
        if act == "spin":
            while True:
                pass
        if act == "python":
            conn.send(_run_user_code(message["code"], message.get("seq")))
            continue
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


def _run_user_code(code: str, seq: Any) -> dict[str, Any]:
    """Run ``code`` as user code would run in the real child; a raised exception is a failure reply
    (as the real child reports a failing reference), not the child's death."""
    namespace: dict[str, Any] = {}
    try:
        exec(compile(code, "<user code>", "exec"), namespace)
    except BaseException as exc:  # MemoryError from the address-space limit included
        return {"status": "failure", "kind": "crash", "message": f"{type(exc).__name__}: {exc}", "seq": seq}
    return {"status": "ok", "result": namespace.get("result"), "seq": seq}
