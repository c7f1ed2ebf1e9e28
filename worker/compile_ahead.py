"""Compile ahead: the queued trials of the job a worker is serving, handed to the backend early.

With prefetch 1 a worker holds one message at a time, but Postgres knows what is queued next for
the same job and GPU model. Handing those to ``Backend.prepare`` lets the cuda backend compile them
on the host's CPU cores while the GPU measures the current trial, so the GPU does not wait for
NVRTC; and while the trial it was sent still compiles, the runner claims and measures queued
trials that are compiled already (their own messages are skipped later as not claimable).
Another worker may claim one of them first; the compiled module is then simply unused (or reused
from the compile cache on the same host).

How many queued trials are read is the worker's ``compile_ahead`` setting (not to be confused
with the coordinator's ``dispatch_lookahead``, which decides how many trials are queued at all).
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import Job, Trial
from kernelfarm.core.states import TrialState
from kernelfarm.core.store import trials as trial_store
from kernelfarm.worker.backends.base import Backend, MeasureRequest
from kernelfarm.worker.trial_request import job_trial_request

logger = logging.getLogger(__name__)

# How often to read the job's queue again (and hand newly queued trials to the compiler) ...
QUEUE_REFRESH_SECONDS = 0.5
# ... and, when nothing in the last read can be claimed, how soon to read it again.
QUEUE_REREAD_SECONDS = 0.05


@dataclass(frozen=True)
class QueuedTrial:
    trial_id: int
    request: MeasureRequest


def queued_trials(session: Session, job_id: uuid.UUID, limit: int) -> list[QueuedTrial]:
    """The job's next ``limit`` queued trials, in dispatch order, as measure requests."""
    job = session.get_one(Job, job_id)
    rows = session.execute(
        select(Trial.id, Trial.config)
        .where(Trial.job_id == job_id, Trial.state == TrialState.QUEUED.value)
        .order_by(Trial.seq)
        .limit(limit)
    ).all()
    return [
        QueuedTrial(
            row.id,
            # The request the runner will measure once it claims the trial: profiles are taken
            # later, in batches, never in the measuring stream.
            job_trial_request(session, job, row.id, row.config, profile=False),
        )
        for row in rows
    ]


ClaimTrial = Callable[[int], trial_store.Claim | None]


class CompiledQueue:
    """The job's queued trials as last read from the database (read again when older than
    QUEUE_REFRESH_SECONDS), each read handing them to the backend to compile ahead.

    Args:
        backend: compiles ahead (``prepare``) and says what is compiled (``ready``).
        job_id: the job whose queued trials are read.
        depth: how many of them are read (and compiled ahead) at a time.
        claim_trial: claims a trial for this worker; None if it is not claimable any more.
    """

    def __init__(self, backend: Backend, job_id: uuid.UUID, depth: int, claim_trial: ClaimTrial) -> None:
        self.backend, self.job_id, self.depth, self.claim_trial = backend, job_id, depth, claim_trial
        self.items: list[QueuedTrial] = []
        self.read_at = -math.inf

    def read(self) -> None:
        self.items = self._compile_ahead()
        self.read_at = time.monotonic()

    def _compile_ahead(self) -> list[QueuedTrial]:
        """Hand the job's next queued trials to the backend so it compiles them while this one is
        measured. Best effort: a failure here only costs the head start."""
        try:
            with session_scope() as session:
                upcoming = queued_trials(session, self.job_id, self.depth)
            self.backend.prepare([q.request for q in upcoming])
            return upcoming
        except Exception:
            logger.warning("compile-ahead for job %s failed; continuing", self.job_id, exc_info=True)
            return []

    def claim(self, leave_last: bool) -> trial_store.Claim | None:
        """Claim the first queued trial whose kernel is compiled. None if there is none, if
        ``leave_last`` and it is the job's last queued trial (an idle worker should have it rather
        than wait for this worker's current measurement), or if the database is unreachable (only
        the head start is lost)."""
        try:
            if time.monotonic() - self.read_at > QUEUE_REFRESH_SECONDS:
                self.read()
            claim = self._claim_read(leave_last)
            if claim is None and time.monotonic() - self.read_at > QUEUE_REREAD_SECONDS:
                # What was read may be stale: other workers took it, or more got queued and compiled.
                self.read()
                claim = self._claim_read(leave_last)
            return claim
        except Exception:
            logger.warning("claiming a compiled trial of job %s failed; continuing", self.job_id, exc_info=True)
            return None

    def _claim_read(self, leave_last: bool) -> trial_store.Claim | None:
        while (compiled := next((q for q in self.items if self.backend.ready(q.request)), None)) is not None:
            if leave_last and len(self.items) < 2:
                return None
            self.items.remove(compiled)  # claimed now, or by someone else already
            claim = self.claim_trial(compiled.trial_id)
            if claim is not None:
                return claim
        return None
