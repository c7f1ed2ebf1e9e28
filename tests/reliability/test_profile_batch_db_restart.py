"""A profile batch whose results meet a PostgreSQL restart is still recorded (fault run of issue 18):
the worker had claimed its requests, so nobody re-sent them until profile_redispatch_after_seconds
(300 s) had passed, and the job idled in "waiting for Nsight Compute profiles" (seen in a CI-scale fault
run at 1f39b20: stuck past the run's 150 s limit). On a server of this module's own."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select, text, update

from kernelfarm.core.db import dispose_engines, session_scope
from kernelfarm.core.migrate import upgrade
from kernelfarm.core.models import Trial, TrialProfile
from kernelfarm.core.settings import get_settings
from kernelfarm.core.store import profiles as profile_store
from kernelfarm.core.store import trials as trial_store
from kernelfarm.services import EmbeddedPostgres
from kernelfarm.testing.recordings import CONVOLUTION, RTX3090
from kernelfarm.worker.backends.base import MeasureRequest, ProfileOutcome
from kernelfarm.worker.backends.replay import ReplayBackend
from kernelfarm.worker.profiling import profile_trials
from tests.conftest import store_job
from tests.reliability.conftest import valid_configs


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    server = EmbeddedPostgres(Path(tmp_path_factory.mktemp("profile-restart")) / "postgres")
    server.start()
    engine = create_engine(server.url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text("CREATE DATABASE kernelfarm"))
    engine.dispose()
    previous = os.environ.get("DATABASE_URL")
    os.environ["DATABASE_URL"] = server.url.rsplit("/", 1)[0] + "/kernelfarm"  # the worker code's session_scope()
    get_settings.cache_clear()
    try:
        upgrade(os.environ["DATABASE_URL"])
        yield server
    finally:
        dispose_engines()
        if previous is None:
            os.environ.pop("DATABASE_URL", None)
        else:
            os.environ["DATABASE_URL"] = previous
        get_settings.cache_clear()
        server.stop("immediate")


class RestartingBackend(ReplayBackend):
    """The replay stand-in for a GPU whose profiler run outlasts a PostgreSQL restart: the server
    goes down while it profiles and is back 1.5 s later."""

    def __init__(self, server: EmbeddedPostgres) -> None:
        super().__init__([CONVOLUTION])
        self.server = server

    def profile(self, requests: list[MeasureRequest]) -> list[ProfileOutcome]:
        self.server.stop("immediate")

        def restart() -> None:
            time.sleep(1.5)
            self.server.start()

        threading.Thread(target=restart).start()
        return list(super().profile(requests))


def test_a_profile_batch_is_recorded_through_a_postgres_restart(postgres: EmbeddedPostgres) -> None:
    with session_scope() as session:
        job = store_job(session, "convolution_kernel", RTX3090)
        trials = trial_store.add_trials(session, job, [(str(i), c) for i, c in enumerate(valid_configs(2))])
        ids = [t.id for t in trials]
        session.execute(update(Trial).where(Trial.id.in_(ids)).values(state="complete", time_ms=1.0, verified=True))
        assert profile_store.request_profiles(session, job.id, ids) == sorted(ids)
        job_id = job.id
    assert profile_trials(job_id, ids, RestartingBackend(postgres), "profile-restart@test") == 2
    with session_scope() as session:
        answered = session.execute(select(TrialProfile.profiled_at).where(TrialProfile.trial_id.in_(ids))).scalars()
        assert all(at is not None for at in answered)
