"""The coordinator survives losing Redis while it steps a job (fault run of issue 18). A message held
unacknowledged while the broker went away (a step in progress, or one waiting for a free pool process)
made Celery restore it through the lost connection, and kombu failed there (AttributeError on the
connection's hostname): the coordinator exited, and no job was stepped until something restarted it.

Two fixes, each enough alone: core/broker_transport.py, and the coordinator's own restore turned off
(tuner/tasks.py). The second variant turns the restore back on in the coordinator process (a
``sitecustomize`` of this test's, on its PYTHONPATH), so it passes through the transport fix alone."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from kernelfarm.core.celery_app import ADVANCE_TASK, TUNER_QUEUE, make_celery
from kernelfarm.core.settings import Settings
from kernelfarm.services import wait_for
from kernelfarm.stack import alive
from kernelfarm.testing.chaos_farm import ChaosFarm
from tests.reliability.conftest import make_job, ready_coordinator, started_farm, valid_configs

# Runs at the coordinator's start-up: once its Celery worker is ready (after tuner/tasks.py turned the
# restore off at worker_init), kombu's default comes back, so only the transport fix stands in the way.
RESTORE_ON = """
from celery.signals import worker_ready


@worker_ready.connect
def _restore_at_shutdown(**_):
    from kombu.transport import redis

    redis.QoS.restore_at_shutdown = True
    print("test hook: kombu restore_at_shutdown is on", flush=True)
"""


# The other way round: kombu's own pool building in the coordinator's transport, so only its restore
# turned off stands in the way.
KOMBU_TRANSPORT = """
from celery.signals import worker_ready


@worker_ready.connect
def _kombu_transport(**_):
    from kombu.transport import redis

    from kernelfarm.core import broker_transport

    broker_transport.Channel._connparams = redis.Channel._connparams
    print("test hook: kombu's transport", flush=True)
"""

HOOKS = {"restore on": RESTORE_ON, "kombu transport": KOMBU_TRANSPORT}


@pytest.fixture(scope="module", params=["as deployed", "restore on", "kombu transport"])
def farm(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosFarm]:
    directory = Path(tmp_path_factory.mktemp("broker-loss"))
    extra_env: dict[str, str] = {}
    if request.param in HOOKS:
        (directory / "hook").mkdir()
        (directory / "hook" / "sitecustomize.py").write_text(HOOKS[request.param])
        extra_env["PYTHONPATH"] = str(directory / "hook")
    with started_farm(directory, extra_env=extra_env) as farm:
        yield farm


def test_a_step_in_progress_when_redis_restarts_does_not_end_the_coordinator(farm: ChaosFarm) -> None:
    coordinator = ready_coordinator(farm)
    job_id, _ = make_job(farm.database_url, valid_configs(1))
    engine = create_engine(farm.database_url)
    release = threading.Event()
    locked = threading.Event()

    def hold_the_job() -> None:  # a step of this job waits for its row: it is in progress meanwhile
        with engine.begin() as connection:
            # finished: housekeeping does not step it too, so only the step sent below waits
            connection.execute(text("UPDATE jobs SET state = 'cancelled' WHERE id = :j"), {"j": str(job_id)})
        with engine.begin() as connection:
            connection.execute(text("SELECT 1 FROM jobs WHERE id = :j FOR UPDATE"), {"j": str(job_id)})
            locked.set()
            release.wait(60)

    holder = threading.Thread(target=hold_the_job)
    holder.start()
    try:
        assert locked.wait(30)
        app = make_celery(Settings(database_url=farm.database_url, redis_url=farm.redis_url))
        # Two steps occupy both pool processes (waiting on the job's row); the third waits for one of
        # them, received and not acknowledged: what a busy coordinator holds when Redis goes away.
        steps = [app.send_task(ADVANCE_TASK, args=[str(job_id)], queue=TUNER_QUEUE) for _ in range(3)]
        app.close()
        for step in steps:  # 60 s: a fresh-clone run on a 2-core machine under three other test loads took over 30
            wait_for(lambda: f"{ADVANCE_TASK}[{step.id}] received" in farm.log("coordinator"), 60, "the steps")  # noqa: B023
        time.sleep(0.5)
        if farm.extra_env:  # the variant's hook ran
            assert "test hook: " in farm.log("coordinator")
        farm.flush_and_restart_redis()
        time.sleep(6)  # the consumer notices the lost connection and reconnects
        log = farm.log("coordinator")
        assert "Unrecoverable error" not in log, log[log.find("Unrecoverable") - 200 :][:1500]
        assert alive(coordinator.pid)
        assert log.count("Connected to ") >= 2  # it consumes again (the broker is named by its transport)
    finally:
        release.set()
        holder.join(30)
        engine.dispose()
        farm.kill("coordinator")
