"""A job whose coordinator step keeps raising fails, instead of being stepped, and failing, forever.

Housekeeping steps every unfinished job every tick, so a step that raised is simply tried again: right
for a lost connection or a lost race, wrong for an error the job's own data causes. Such a job never
finished: tune values a config key could not tell apart raised an IntegrityError at every step, every
3 s, until they were refused at upload. A job now fails once ``settings.max_step_failures`` steps in a
row raised; a step that succeeds starts the count again (tuner/coordinator.py). Lost connections to
PostgreSQL or Redis, and transactions PostgreSQL rolled back in a conflict, are not counted: they say
nothing about the job, and a broker restart must not fail every running job.
"""

from __future__ import annotations

import logging
import uuid

import kombu.exceptions
import redis.exceptions
from sqlalchemy import update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from kernelfarm.core.db import is_unavailable, session_scope, sqlstate
from kernelfarm.core.error_summary import summarize
from kernelfarm.core.errors import NotFound, Unavailable
from kernelfarm.core.models import Job
from kernelfarm.core.settings import Settings
from kernelfarm.core.states import JobState
from kernelfarm.core.store import jobs as job_store

logger = logging.getLogger(__name__)

# SQLSTATE class 40, transaction rollback: a serialization failure or a deadlock, a lost race.
_ROLLED_BACK = "40"
_LOST_CONNECTION = (PoolTimeout, Unavailable, ConnectionError, TimeoutError, redis.exceptions.ConnectionError,
                    redis.exceptions.TimeoutError, kombu.exceptions.OperationalError)  # fmt: skip


def says_nothing_about_the_job(exc: BaseException) -> bool:
    """A lost connection, a database that cannot serve now, or a transaction lost to a concurrent one."""
    if isinstance(exc, DBAPIError):
        return is_unavailable(exc) or sqlstate(exc).startswith(_ROLLED_BACK)
    return isinstance(exc, _LOST_CONNECTION)


def step_failed(job_id: uuid.UUID | str, exc: BaseException, settings: Settings) -> bool:
    """Count a step of the job that raised ``exc``; True if that failed the job. Best effort: when the
    count cannot be written (the database went away meanwhile) the step is simply tried again."""
    if says_nothing_about_the_job(exc):
        return False
    try:
        with session_scope() as session:
            job = job_store.get_job(session, job_id, for_update=True)
            if JobState(job.state).finished:
                return False
            failures = job.step_failures + 1
            if failures < settings.max_step_failures:
                session.execute(update(Job).where(Job.id == job.id).values(step_failures=failures))
                logger.warning("job %s: step failed (%d in a row, it fails at %d)", job.id, failures,
                               settings.max_step_failures)  # fmt: skip
                return False
            reason = summarize(exc)  # no SQL statement or parameters: every reader of the job sees it
            job_store.fail_job(session, job, f"failed: its coordinator step raised {failures} times in a row "
                                             f"({reason}); the coordinator's log has the traceback")  # fmt: skip
            job.step_failures = failures
            logger.error("job %s failed after %d failing steps in a row", job.id, failures)
            return True
    except NotFound:
        return False
    except Exception:
        logger.warning("job %s: could not count its failed step", job_id, exc_info=True)
        return False
