"""Soft and hard time limits around one measurement.

They are enforced here, not by Celery: the worker runs Celery's solo pool (one process per GPU, no
fork), and the solo pool ignores ``task_soft_time_limit``/``task_time_limit``. The soft limit
raises :class:`SoftTimeLimitExceeded` in the measuring (main) thread and the runner records the
trial as failed with kind "timeout"; the hard limit is for a backend stuck where Python cannot
interrupt it (a hung driver call): the process exits, the unacknowledged message stays in the
broker, and the reaper retries the trial up to the retry cap.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from types import FrameType

from celery.exceptions import SoftTimeLimitExceeded

logger = logging.getLogger(__name__)

HARD_LIMIT_EXIT_CODE = 70


class TimeLimits:
    """Soft and hard time limits around one measurement (see the module docstring).

    The soft limit needs the main thread (signals are delivered there), which is where the solo
    pool runs tasks; elsewhere (tests calling evaluate from a thread) only the hard limit applies.
    """

    def __init__(self, soft_seconds: float | None, hard_seconds: float | None) -> None:
        self.soft, self.hard = soft_seconds, hard_seconds
        self._timer: threading.Timer | None = None
        self._previous: object = None
        self._outer_timer = 0.0  # an ITIMER_REAL someone else armed (pytest-timeout): restored on exit
        self._armed_at = 0.0
        self._armed = False

    def __enter__(self) -> TimeLimits:
        if self.soft and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGALRM, self._on_soft_limit)
            self._outer_timer = signal.setitimer(signal.ITIMER_REAL, self.soft)[0]
            self._armed_at = time.monotonic()
            self._armed = True
        if self.hard:
            self._timer = threading.Timer(self.hard, self._on_hard_limit)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)  # type: ignore[arg-type]
            if self._outer_timer > 0:
                remaining = self._outer_timer - (time.monotonic() - self._armed_at)
                signal.setitimer(signal.ITIMER_REAL, max(remaining, 0.001))
        if self._timer is not None:
            self._timer.cancel()

    def _on_soft_limit(self, signum: int, frame: FrameType | None) -> None:
        raise SoftTimeLimitExceeded(f"soft time limit ({self.soft:g} s) exceeded")

    def _on_hard_limit(self) -> None:
        logger.critical("hard time limit (%s s) exceeded: the measurement is stuck; exiting the worker", self.hard)
        logging.shutdown()
        os._exit(HARD_LIMIT_EXIT_CODE)
