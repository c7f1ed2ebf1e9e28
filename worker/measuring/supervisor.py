"""Parent side of the measuring child: start, ask, wait with a deadline, replace after a fault.

The worker process never holds a CUDA context. Every measurement happens in one long-lived spawned
child; a kernel that poisons the context makes the child exit after replying, and a kernel that
hangs is killed at the deadline. Either way the next request gets a fresh child (about a second:
interpreter, CuPy import, context creation), and the worker itself carries on.

Requests can be pipelined: ``send`` several, then ``receive`` each in order. The child starts on
the next request the moment it has answered one, so the GPU does not wait while the worker writes
the previous result to the database. A replaced child loses the requests queued in its pipe;
``receive`` says so (None) and the caller sends them again. A child found dead when the next request
is sent is replaced then; what it answered before dying, and a crash for the request it died on, are
still received.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import time
from collections import deque
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from kernelfarm.core.states import FailureKind
from kernelfarm.worker.measuring import child
from kernelfarm.worker.measuring.child import ChildConfig
from kernelfarm.worker.measuring.sandbox import start_confined

logger = logging.getLogger(__name__)


class ChildGone(Exception):
    """The child died without replying (a crash inside the driver, the OOM killer, ...)."""


class MeasuringChild:
    """The parent's handle on one measuring child (replaced transparently when it dies)."""

    def __init__(
        self,
        config: ChildConfig,
        start_timeout_s: float = 120.0,
        target: Callable[[Connection, ChildConfig], None] | None = None,
    ) -> None:
        """
        Args:
            config: what the child is started with (the backend's loader, device, log level).
            start_timeout_s: how long a starting child may take to say it is ready.
            target: the child's main loop, ``target(conn, config)``; default :func:`child.serve`.
                Tests pass a fake (:mod:`.fake_child`).
        """
        self.config = config
        self.start_timeout_s = start_timeout_s
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None
        self.environment: dict[str, Any] = {}
        self.restarts = 0
        self._sequence = 0
        self._in_flight: deque[int] = deque()  # sequence numbers sent to the current child, oldest first
        # Replies of a child that died before they were received (see _settle_dead_child).
        self._settled: dict[int, dict[str, Any]] = {}
        self._target = target or child.serve

    # ------------------------------------------------------------------ lifecycle
    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")
        parent, child_end = context.Pipe()
        process = context.Process(
            target=self._target,
            args=(child_end, self.config),
            daemon=True,
            name=f"kernelfarm-measure-{self.config.device_ordinal}",
        )
        with start_confined():  # the child inherits no secret (sandbox.py)
            process.start()
        child_end.close()
        if not parent.poll(self.start_timeout_s):
            process.kill()
            raise ChildGone(f"measuring child did not start within {self.start_timeout_s} s")
        hello = parent.recv()
        self.environment = hello.get("environment", {})
        self._process, self._conn = process, parent
        logger.info("measuring child %s started on device %d", process.pid, self.config.device_ordinal)

    def _kill(self) -> None:
        self._in_flight.clear()  # whatever was queued in the pipe dies with the child
        if self._process is not None and self._process.is_alive():
            self._process.kill()
            self._process.join(10)
        if self._conn is not None:
            self._conn.close()
        self._process, self._conn = None, None

    def close(self) -> None:
        if self._conn is not None and self._process is not None and self._process.is_alive():
            try:
                self._conn.send({"op": "stop"})
                self._process.join(5)
            except (OSError, EOFError):
                pass
        self._kill()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    # ------------------------------------------------------------------ requests
    def ask(
        self, message: Mapping[str, Any], timeout_s: float, keep_alive: Callable[[], bool] | None = None
    ) -> dict[str, Any]:
        """Send one request and wait for the reply.

        Returns:
            The child's reply; a TIMEOUT failure when the deadline passed (the child is killed);
            a CRASH failure when the child died without replying.
        """
        reply = self.receive(self.send(message), timeout_s, keep_alive)
        assert reply is not None  # sent to the child we then waited on
        return reply

    def warm(self, timeout_s: float = 300.0) -> dict[str, Any]:
        """Start the child (if needed) and have it load its libraries and the kernel catalogue.

        Returns:
            The child's reply: ``status``, and ``warm_s`` (its seconds of loading) when "ok".
        """
        return self.ask({"op": "warm"}, timeout_s)

    def send(self, message: Mapping[str, Any]) -> int:
        """Queue one request on the child (starting one if needed); returns its sequence number."""
        if self._process is None or not self._process.is_alive():
            self._replace_child()
        assert self._conn is not None
        self._sequence += 1
        try:
            self._conn.send({**message, "seq": self._sequence})
        except (BrokenPipeError, ConnectionResetError):
            # It died between the check above and this write (its end of the pipe is closed): the same
            # as finding it dead there; the request goes to its replacement.
            self._replace_child()
            self._send_or_kill({**message, "seq": self._sequence})
        except BaseException:
            self._kill()  # the pipe is in an unknown state
            raise
        self._in_flight.append(self._sequence)
        return self._sequence

    def _replace_child(self) -> None:
        """Start a child in place of a dead one (or the first), keeping what the dead one answered."""
        if self._process is not None:
            self._process.join(2)  # reap it: its exit code says why it died
            self.restarts += 1
            self._settle_dead_child()
        self._kill()
        self._start()

    def _send_or_kill(self, message: Mapping[str, Any]) -> None:
        assert self._conn is not None
        try:
            self._conn.send(dict(message))
        except BaseException:
            self._kill()  # the child is gone or the pipe is in an unknown state
            raise

    def in_flight(self, sequence: int) -> bool:
        """Will :meth:`receive` answer ``sequence``: sent and not yet received, and not lost with a
        replaced child?"""
        return sequence in self._in_flight or sequence in self._settled

    def _settle_dead_child(self) -> None:
        """The child died with requests queued on it, and is about to be replaced (a crash found
        only when the next request is sent: the parent was compiling it meanwhile). Keep for
        :meth:`receive` the replies it sent before dying and a CRASH for the request it died on (the
        oldest one it did not answer); the requests queued behind that one are lost with it."""
        assert self._process is not None
        replies: dict[Any, dict[str, Any]] = {}
        try:
            while self._conn is not None and self._conn.poll(0):
                reply = self._conn.recv()
                replies[reply.get("seq")] = reply
        except (EOFError, OSError):
            pass  # everything it sent has been read
        for sequence in self._in_flight:
            reply = replies.get(sequence) or _died_without_reply(self._process.exitcode)
            self._settled[sequence] = reply
            if sequence not in replies or reply.get("poisoned"):
                break  # it exited here: nothing after this one was answered

    def receive(
        self, sequence: int, timeout_s: float, keep_alive: Callable[[], bool] | None = None
    ) -> dict[str, Any] | None:
        """Wait for the reply to ``sequence``, the oldest request in flight; its deadline starts now
        (the child reaches a queued request only after answering the ones before it).

        Returns:
            As :meth:`ask`; or None when ``sequence`` is not in flight: it was lost with a child
            that was replaced (send it again).
        """
        for settled in [s for s in self._settled if s <= sequence]:
            reply = self._settled.pop(settled)  # older ones were abandoned by their callers
            if settled == sequence:
                return reply
        if sequence not in self._in_flight:
            return None
        while self._in_flight and self._in_flight[0] != sequence:
            self._in_flight.popleft()  # abandoned by its caller: its reply is discarded as stale
        try:
            reply = self._wait(sequence, timeout_s, keep_alive)
        except BaseException:
            # Interrupted (a Celery soft time limit, Ctrl-C): the child may still be working and its
            # late reply would answer the next request. Replace it.
            self._kill()
            raise
        if self._in_flight and self._in_flight[0] == sequence:
            self._in_flight.popleft()
        return reply

    def _wait(self, sequence: int, timeout_s: float, keep_alive: Callable[[], bool] | None) -> dict[str, Any]:
        assert self._conn is not None and self._process is not None
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill()
                return {
                    "status": "failure",
                    "kind": FailureKind.TIMEOUT.value,
                    "message": f"no result within {timeout_s:.1f} s: kernel hung or ran too long; child killed",
                }
            try:
                ready = self._conn.poll(min(1.0, remaining))
            except (OSError, EOFError):
                ready = True
            if ready:
                try:
                    reply: dict[str, Any] = self._conn.recv()
                except (EOFError, OSError):
                    if self._process is not None:
                        self._process.join(2)  # reap it: its exit code says why it died
                    code = self._process.exitcode if self._process else None
                    self._kill()
                    return _died_without_reply(code)
                if reply.get("seq") not in (None, sequence):
                    logger.warning("discarding a stale reply of request %s", reply.get("seq"))
                    continue
                if reply.get("poisoned"):
                    self._kill()
                return reply
            if not self._process.is_alive():
                code = self._process.exitcode
                self._kill()
                return _died_without_reply(code)
            if keep_alive is not None and not keep_alive():
                # The lease is gone: the result would be discarded. Stop the work now.
                self._kill()
                return {
                    "status": "failure",
                    "kind": FailureKind.CRASH.value,
                    "message": "lease lost; measurement abandoned",
                }


def _died_without_reply(exit_code: int | None) -> dict[str, Any]:
    why = {
        -signal.SIGXCPU: ": it used more than its CPU time limit",
        -signal.SIGKILL: ": killed (out of memory?)",
        -signal.SIGSEGV: ": segmentation fault",
    }.get(exit_code if exit_code is not None else 0, "")
    return {
        "status": "failure",
        "kind": FailureKind.CRASH.value,
        "message": f"measuring child died without a reply (exit code {exit_code}){why}",
    }
