"""Keeping a claimed trial's lease alive while the worker measures it.

A heartbeat thread stamps the lease with the database clock; if the lease is lost (reaped, job
cancelled) the measurement goes on but its result is discarded by the store's conditional write.
"""

from __future__ import annotations

import logging
import threading

from kernelfarm.core.db import session_scope
from kernelfarm.core.store import trials as trial_store

logger = logging.getLogger(__name__)


class LeaseKeeper:
    """Heartbeats a trial's lease from a background thread until stopped."""

    def __init__(self, trial_id: int, attempt: int, interval: float) -> None:
        self.trial_id, self.attempt, self.interval = trial_id, attempt, interval
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{trial_id}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def alive(self) -> bool:
        return not self.lost

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                with session_scope() as session:
                    if not trial_store.heartbeat(session, self.trial_id, self.attempt):
                        self.lost = True
                        return
            except Exception:  # database briefly unreachable: keep trying, the lease has slack
                logger.warning("heartbeat for trial %s failed; retrying", self.trial_id, exc_info=True)
