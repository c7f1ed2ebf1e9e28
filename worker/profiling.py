"""One profile batch on one worker: the requested trials → one profiler run → one row each.

Runs as a task of the worker that serves the GPU, between its measurements: the worker's solo
pool runs one task at a time, so a profile never overlaps a timed measurement, which it would
disturb. Redeliveries are harmless: a profile is recorded once. Both database steps are retried
through a PostgreSQL restart (worker/db_retry.py), as a trial's claim and result are: a batch whose
requests this live worker claimed, but whose results it failed to write, is re-sent by nobody until
``profile_redispatch_after_seconds`` (300 s) have passed.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from sqlalchemy import select

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import Job, Trial, TrialProfile
from kernelfarm.core.states import TrialState
from kernelfarm.core.store import profiles as profile_store
from kernelfarm.worker.backends.base import Backend, MeasureRequest
from kernelfarm.worker.db_retry import with_db_retry
from kernelfarm.worker.trial_request import job_trial_request

logger = logging.getLogger(__name__)


def profile_trials(job_id: uuid.UUID, trial_ids: list[int], backend: Backend, worker_name: str) -> int:
    """Profile the still-unanswered requests among ``trial_ids``; returns how many were recorded."""
    rows, requests = with_db_retry("claim profile batch", lambda: _claim(job_id, trial_ids, worker_name))
    if not requests:
        return 0
    started = time.perf_counter()
    outcomes = backend.profile(requests)
    wall = time.perf_counter() - started

    def record() -> int:  # each try its own transaction; a profile already recorded is not written again
        recorded = 0
        with session_scope() as session:
            for row, outcome in zip(rows, outcomes, strict=True):
                recorded += profile_store.record_profile(
                    session, row.id, metrics=dict(outcome.metrics) if outcome.metrics else None,
                    error=outcome.error, worker_name=worker_name, batch_size=len(requests), wall_seconds=wall,
                )  # fmt: skip
        return recorded

    recorded = with_db_retry("record profile batch", record)
    logger.info("profiled %d trial(s) of job %s in %.1f s", recorded, job_id, wall)
    return recorded


def _claim(job_id: uuid.UUID, trial_ids: list[int], worker_name: str) -> tuple[list[Any], list[MeasureRequest]]:
    """The batch's unanswered requests this worker takes (also those it took before: a retry), and
    what to profile for each."""
    with session_scope() as session:
        job = session.get_one(Job, job_id)
        rows = session.execute(
            select(Trial.id, Trial.config)
            .join(TrialProfile, TrialProfile.trial_id == Trial.id)
            .where(
                Trial.id.in_(trial_ids),
                Trial.job_id == job_id,
                Trial.state == TrialState.COMPLETE.value,
                TrialProfile.profiled_at.is_(None),
            )
            .order_by(Trial.id)
        ).all()
        taken = profile_store.claim(session, [row.id for row in rows], worker_name)
        rows = [row for row in rows if row.id in taken]
        requests = [job_trial_request(session, job, row.id, row.config, profile=True) for row in rows]
    return list(rows), requests
