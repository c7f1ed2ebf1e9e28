"""The measuring child: the only process of a worker that measures on the GPU.

It receives requests over a pipe, has the backend's loader load what was compiled elsewhere, makes
inputs, verifies and times (:mod:`.session`). A fault that poisons the context (illegal address,
unspecified launch failure, ...) is reported and the child exits; the parent starts a fresh one. A
hang is the parent's to detect (it stops waiting and kills us).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from kernelfarm.core.states import FailureKind
from kernelfarm.core.tracebacks import portable_traceback
from kernelfarm.kernels.reference_failure import ReferenceDoesNotCompile
from kernelfarm.worker.measuring.faults import classify_error, is_cuda_error
from kernelfarm.worker.measuring.loader import KernelLoader
from kernelfarm.worker.measuring.sandbox import ChildLimits, enter, limit_cpu_for_request
from kernelfarm.worker.measuring.session import Session, failure_reply

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChildConfig:
    """Everything the spawned child is started with (pickled to it: it reads no environment)."""

    loader: KernelLoader  # the backend's load-and-launch step
    device_ordinal: int = 0  # CUDA numbering, after CUDA_VISIBLE_DEVICES
    refs: Mapping[str, str] = field(default_factory=dict)  # kernels outside the registry: "module:ATTR"
    log_level: str = "WARNING"
    limits: ChildLimits = field(default_factory=ChildLimits)  # its confinement (sandbox.py)


def environment() -> dict[str, Any]:
    """What the child runs with, for the provenance of its measurements."""
    import cupy as cp

    runtime = cp.cuda.runtime
    return {
        "cupy_version": cp.__version__,
        "cuda_runtime_version": runtime.runtimeGetVersion(),
        "cuda_driver_api_version": runtime.driverGetVersion(),
        "pid": os.getpid(),
    }


def serve(conn: Connection, config: ChildConfig) -> None:
    """Child main loop (target of a spawned process): answer requests in order until "stop" or EOF.

    Ops: ``measure`` (see :meth:`Session.measure`), ``warm`` (load libraries), ``ceilings`` (measure
    the GPU's roofline ceilings). Every reply carries the request's ``seq``.
    """
    confinement = enter(config.limits)  # first: while this process is one thread
    logging.basicConfig(level=config.log_level)
    import cupy as cp

    cp.cuda.Device(config.device_ordinal).use()
    session = Session(config.loader, config.refs)
    conn.send({"status": "ready", "environment": {**environment(), "sandbox": confinement}})
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        received, received_at = time.perf_counter(), time.time()
        limit_cpu_for_request(config.limits)
        op = message.get("op")
        if op == "stop":
            return
        try:
            if op == "measure":
                reply = session.measure(message)
            elif op == "warm":
                reply = {"status": "ok", "warm_s": session.warm()}
            elif op == "ceilings":
                from kernelfarm.worker.measuring.roofline import measure_ceilings

                reply = {"status": "ok", "ceilings": asdict(measure_ceilings())}
            else:
                reply = failure_reply(FailureKind.CRASH, f"unknown op {op!r}")
        except ReferenceDoesNotCompile as exc:  # the owner's reference source: a compile failure, context intact
            reply = failure_reply(FailureKind.COMPILE, str(exc))
        except Exception as exc:  # a kernel fault is data; decide whether the context survived
            text = f"{type(exc).__name__}: {exc}"
            kind, poisoned = classify_error(text)
            if not is_cuda_error(exc):
                kind, poisoned = FailureKind.CRASH, False
                text += "\n" + portable_traceback(exc, frames=6)
            reply = failure_reply(kind, text)
            reply["poisoned"] = poisoned
            reply["seq"] = message.get("seq")
            conn.send(reply)
            if poisoned:
                return  # exit: the parent starts a fresh child with a fresh context
            continue
        reply["seq"] = message.get("seq")
        # The child's own time for this request: what the parent's wall time adds on top of it is
        # the pipe and the parent's wake-up; what it adds to gpu_s is module load and set-up.
        reply["child_s"] = time.perf_counter() - received
        # When it started, on the host's clock: with child_s, each GPU's timeline of a job.
        reply["child_started_at"] = received_at
        conn.send(reply)
