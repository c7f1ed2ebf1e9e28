"""A job whose coordinator step keeps raising fails after settings.max_step_failures steps in a row
(tuner/step_failures.py); lost connections and lost races are not counted. Against the test database,
with real errors of PostgreSQL, psycopg2 and Redis; tests/e2e/test_impossible_jobs.py has the whole
chain through a running coordinator."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator

import pytest
import redis
from sqlalchemy import create_engine, delete, text
from sqlalchemy.exc import DBAPIError

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import Job
from kernelfarm.core.settings import get_settings
from kernelfarm.core.store import jobs as job_store
from kernelfarm.services import free_port
from kernelfarm.tuner import coordinator
from kernelfarm.tuner.step_failures import says_nothing_about_the_job, step_failed
from tests.conftest import raised, served_gpu_model, store_job
from tests.kernels.manifests import user_manifest
from tests.stored_versions import fresh_kernel_name, store_unchecked


def test_lost_connections_and_lost_races_say_nothing_about_the_job(database_url: str) -> None:
    port = free_port()  # nobody listens there
    refused = create_engine(f"postgresql+psycopg2://kf@127.0.0.1:{port}/kf", connect_args={"connect_timeout": 2})
    assert says_nothing_about_the_job(raised(refused.connect))
    assert says_nothing_about_the_job(raised(redis.Redis(port=port, socket_connect_timeout=2).ping))
    engine = create_engine(database_url)
    with engine.connect() as connection:
        # SQLSTATE 40001 and 57014 as PostgreSQL raises them: a lost race, a statement timeout
        serialization = raised(lambda: connection.execute(text(
            "DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = 'serialization_failure'; END $$")))  # fmt: skip
        connection.rollback()
        connection.execute(text("SET statement_timeout = 50"))
        timeout = raised(lambda: connection.execute(text("SELECT pg_sleep(1)")))
        connection.rollback()
        # What the job's own data causes: a unique violation, a type error
        connection.execute(text("CREATE TEMPORARY TABLE kf_once (k int PRIMARY KEY)"))
        connection.execute(text("INSERT INTO kf_once VALUES (1)"))
        duplicate = raised(lambda: connection.execute(text("INSERT INTO kf_once VALUES (1)")))
    engine.dispose()
    assert isinstance(serialization, DBAPIError) and says_nothing_about_the_job(serialization)
    assert isinstance(timeout, DBAPIError) and says_nothing_about_the_job(timeout)
    assert isinstance(duplicate, DBAPIError) and not says_nothing_about_the_job(duplicate)
    assert not says_nothing_about_the_job(raised(lambda: int("sixteen")))


@pytest.fixture
def job_id(database_url: str) -> Iterator[uuid.UUID]:
    model = f"test-step-failures-{secrets.token_hex(4)}"  # no worker serves it: a step only waits
    with session_scope(database_url) as session:
        job = store_job(session, "convolution_kernel", model)
        created = job.id
    yield created
    with session_scope(database_url) as session:
        session.execute(delete(Job).where(Job.id == created))


def stored(job_id: uuid.UUID) -> Job:
    with session_scope() as session:
        return job_store.get_job(session, job_id)


def test_a_job_fails_at_the_fifth_failing_step_in_a_row_and_a_good_step_starts_the_count_again(
    job_id: uuid.UUID,
) -> None:
    settings = get_settings()
    assert settings.max_step_failures == 5
    error = TypeError("'int' object is not iterable")
    assert [step_failed(job_id, error, settings) for _ in range(4)] == [False] * 4
    assert stored(job_id).state == "queued" and stored(job_id).step_failures == 4

    coordinator.advance(job_id, settings, lambda *a: None, lambda *a: None)  # a step that succeeds
    assert stored(job_id).step_failures == 0
    assert [step_failed(job_id, error, settings) for _ in range(4)] == [False] * 4
    assert step_failed(job_id, error, settings)
    job = stored(job_id)
    assert job.state == "failed" and job.step_failures == 5 and job.finished_at is not None
    assert "raised 5 times in a row (TypeError: 'int' object is not iterable)" in job.status_message
    assert not step_failed(job_id, error, settings)  # a finished job is left as it is
    assert stored(job_id).status_message == job.status_message


def test_lost_connections_are_not_counted(job_id: uuid.UUID) -> None:
    lost = raised(redis.Redis(port=free_port(), socket_connect_timeout=2).ping)
    for _ in range(10):
        assert not step_failed(job_id, lost, get_settings())
    assert stored(job_id).step_failures == 0 and stored(job_id).state == "queued"


@pytest.fixture
def served_model(database_url: str) -> Iterator[str]:
    """The step gets as far as proposing trials."""
    with served_gpu_model(database_url, "test-step-failures") as model:
        yield model


def test_a_job_failed_by_a_database_error_says_so_without_its_statement_or_parameters(
    database_url: str, served_model: str
) -> None:
    """A version stored before uploads were checked for config keys too long to store (a tune value of 1100
    characters: tests/api/test_key_lengths.py) made each step raise a DataError inserting its trials. The job
    failed with the error's text: the INSERT INTO trials statement and its parameters, in the status message
    every reader of the job sees."""
    settings = get_settings()
    with fresh_kernel_name(database_url, "long-value") as name:
        manifest = {**user_manifest(), "name": name}
        manifest["tune_params"]["variant"] = ["v" * 1100]
        store_unchecked(database_url, manifest)
        with session_scope(database_url) as session:
            job_id = store_job(session, name, served_model, budget_trials=2).id
        for _ in range(settings.max_step_failures):
            error = raised(lambda: coordinator.advance(job_id, settings, lambda *a: None, lambda *a: None))
            assert isinstance(error, DBAPIError) and "INSERT INTO trials" in str(error)  # what it was
            step_failed(job_id, error, settings)
        job = stored(job_id)
        assert job.state == "failed"
        message = job.status_message
        assert "raised 5 times in a row (DataError: value too long for type character varying(1024));" in message
        for leaked in ("INSERT", "trials", "[SQL", "parameters", "vvvv", "sqlalche.me"):
            assert leaked not in message, message
