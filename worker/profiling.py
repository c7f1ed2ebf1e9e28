"""One profile batch on one worker: the requested trials → one profiler run → one row each.

Runs as a task of the worker that serves the GPU, between its measurements: the worker's solo
pool runs one task at a time, so a profile never overlaps a timed measurement, which it would
disturb. Redeliveries are harmless: a profile is recorded once.
"""

from __future__ import annotations

import logging
import time
import uuid

from sqlalchemy import select

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import Job, Trial, TrialProfile
from kernelfarm.core.states import TrialState
from kernelfarm.core.store import profiles as profile_store
from kernelfarm.worker.backends.base import Backend
from kernelfarm.worker.trial_request import job_trial_request

logger = logging.getLogger(__name__)


def profile_trials(job_id: uuid.UUID, trial_ids: list[int], backend: Backend, worker_name: str) -> int:
    """Profile the still-unanswered requests among ``trial_ids``; returns how many were recorded."""
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
    if not requests:
        return 0
    started = time.perf_counter()
    outcomes = backend.profile(requests)
    wall = time.perf_counter() - started
    recorded = 0
    with session_scope() as session:
        for row, outcome in zip(rows, outcomes, strict=True):
            recorded += profile_store.record_profile(
                session, row.id, metrics=dict(outcome.metrics) if outcome.metrics else None, error=outcome.error,
                worker_name=worker_name, batch_size=len(requests), wall_seconds=wall,
            )  # fmt: skip
    logger.info("profiled %d trial(s) of job %s in %.1f s", recorded, job_id, wall)
    return recorded
