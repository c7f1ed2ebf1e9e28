"""A stand-in for the measuring child's main loop (no CUDA): hangs, dies or answers on request."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from multiprocessing.connection import Connection


def serve(conn: Connection, device_ordinal: int, refs: Mapping[str, str]) -> None:
    conn.send({"status": "ready", "environment": {"pid": os.getpid()}})
    while True:
        message = conn.recv()
        op = message.get("op")
        if op == "hang":
            time.sleep(3600)
        if op == "die":
            os._exit(3)
        if op == "poison":
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
        conn.send({"status": "ok", "pid": os.getpid(), "seq": message.get("seq")})
