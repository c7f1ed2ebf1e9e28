"""One trial on one worker: claim (lease) → measure → write the result (conditional on the
attempt) → ask the coordinator for the next step.

The hardware is injected (a Backend), so this runs the same with the cuda and replay backends.
While the backend measures, a heartbeat thread keeps the lease alive with the database clock; if
the lease is lost (reaped, job cancelled) the measurement is discarded by the conditional write.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from core.db import session_scope
from core.states import ProfileMode
from core.store import trials as trial_store
from worker.backends.base import Backend, MeasureRequest

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    trial_id: int
    status: str  # "recorded" | "skipped" (not claimable) | "stale" (lease lost before the write)
    job_id: uuid.UUID | None = None


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


def evaluate(
    trial_id: int,
    backend: Backend,
    worker_name: str,
    gpu_uuid: str | None,
    heartbeat_seconds: float,
    request_next_step: Callable[[uuid.UUID], None],
) -> Outcome:
    with session_scope() as session:
        claim = trial_store.claim(session, trial_id, worker_name, gpu_uuid)
    if claim is None:
        logger.info("trial %s is not claimable (duplicate delivery, finished or cancelled); skipped", trial_id)
        return Outcome(trial_id, "skipped")
    request = MeasureRequest(
        kernel_name=claim.kernel_name,
        problem=claim.problem,
        config=claim.config,
        profile=claim.profile == ProfileMode.ALL.value,
        seed=(claim.seed * 1_000_003 + claim.trial_id) & 0x7FFFFFFF,
    )
    with LeaseKeeper(claim.trial_id, claim.attempt, heartbeat_seconds) as lease:
        measurement = backend.measure(request, keep_alive=lease.alive)
    with session_scope() as session:
        written = trial_store.record_result(session, claim.trial_id, claim.attempt, measurement)
    if not written:
        logger.warning("trial %s attempt %s lost its lease; result discarded", trial_id, claim.attempt)
    request_next_step(claim.job_id)
    return Outcome(trial_id, "recorded" if written else "stale", claim.job_id)
