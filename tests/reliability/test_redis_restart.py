"""The coordinator survives Redis restarts (docs/RELIABILITY.md; core/broker_transport.py).

It used to exit on its own now and then while Redis restarted: Celery's consumer, closing its broken
connection, closed a channel that held an unacknowledged message after the transport had lost its
client, and kombu's Redis transport raised ``AttributeError: 'NoneType' object has no attribute
'hostname'`` (celery/kombu#582's class), which no caller on that path tolerates. Reproduced before the
fix: the coordinator exited at the 13th of 40 restarts under load (same harness as below).

Everything runs on a Redis (and PostgreSQL) of this module's own: restarting it touches no other test."""

from __future__ import annotations

import os
import random
import signal
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from kernelfarm.core.celery_app import make_celery
from kernelfarm.core.settings import Settings
from kernelfarm.services import EmbeddedRedis
from kernelfarm.stack import alive
from kernelfarm.testing.chaos_farm import ChaosFarm
from tests.conftest import wait_for
from tests.reliability.conftest import STARTUP_TIMEOUT, make_job, ready_coordinator, trial_rows, valid_configs


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "redis")
    server.start()
    yield server
    assert server.pid is not None
    os.kill(server.pid, signal.SIGTERM)
    wait_for(lambda: not alive(server.pid), 20, "the test's redis to stop")  # type: ignore[arg-type]


def test_closing_a_channel_after_its_transport_closed_is_a_connection_error(own_redis: EmbeddedRedis) -> None:
    """The state a lost connection leaves (see the module docstring), reached directly: the transport
    has lost its client, the channel still holds a delivered, unacknowledged message. Closing the
    connection must not raise; the message stays in Redis's unacked set, from which kombu restores it."""
    app = make_celery(Settings(redis_url=own_redis.url))
    connection = app.connection_for_write()
    queue = connection.SimpleQueue("kernelfarm-test-restart")
    queue.put({"step": 1})
    delivered = queue.get(timeout=10)  # not acknowledged
    assert delivered.payload == {"step": 1}
    connection._do_close_transport()  # what Connection.collect() did before the consumer's close()
    connection.close()  # raised AttributeError ('NoneType' object has no attribute 'hostname')
    assert redis.Redis.from_url(own_redis.url).hlen("unacked") == 1
    app.close()


def test_publishing_through_a_channel_a_reconnection_closed_reconnects(own_redis: EmbeddedRedis) -> None:
    """A producer still holding a channel that was closed (kombu sets its transport to None) must
    publish through a new one. Building the pool read the closed channel's transport: a coordinator
    step's dispatch raised ``AttributeError: 'NoneType' object has no attribute 'client'`` in a stress
    run of 100 restarts (the step failed and housekeeping stepped the job again). The same read is on
    the path that restores a closed channel's unacknowledged messages, where only connection errors
    are tolerated."""
    app = make_celery(Settings(redis_url=own_redis.url))
    with app.producer_or_acquire() as producer:
        producer.channel.close()
        producer.publish({"step": 1}, routing_key="kernelfarm-test-closed-channel", retry=True)
    assert redis.Redis.from_url(own_redis.url).llen("kernelfarm-test-closed-channel") == 1
    app.close()


@pytest.fixture(scope="module")
def farm(own_farm: ChaosFarm) -> Iterator[ChaosFarm]:
    ready_coordinator(own_farm)
    for _ in range(2):
        own_farm.start_worker(sleep_ms=20)
    wait_for(lambda: all(map(own_farm.worker_ready, own_farm.workers())), STARTUP_TIMEOUT, "the workers")
    yield own_farm


def test_the_coordinator_survives_redis_restarts_under_load(farm: ChaosFarm) -> None:
    # Three jobs that never run out of budget keep the coordinator stepping (and acknowledging late)
    # through every restart.
    jobs = [make_job(farm.database_url, valid_configs(2, offset=2 * j), budget=5000, parallelism=4)[0]
            for j in range(3)]  # fmt: skip
    coordinator = farm.processes["coordinator"].pid

    def complete() -> int:
        return sum(1 for job in jobs for row in trial_rows(farm.database_url, job) if row.state == "complete")

    wait_for(lambda: complete() >= 10, 60, "the jobs to be stepped")
    rng = random.Random(2)  # the schedule that reproduced the exit
    for restart in range(20):
        time.sleep(rng.uniform(0.2, 3.0))
        farm.flush_and_restart_redis(down_seconds=rng.uniform(0.0, 2.5))
        time.sleep(0.5)
        assert alive(coordinator), (
            f"the coordinator exited at restart {restart + 1}:\n{farm.log('coordinator')[-3000:]}"
        )
    before = complete()

    # Still serving: the jobs go on (their lost messages come back through housekeeping). A component
    # that exits after the last check above ends the wait at once, with what it logged.
    def all_alive() -> bool:
        return all(alive(p.pid) for p in farm.processes.values())

    try:
        wait_for(lambda: complete() >= before + 10 or not all_alive(), 90, "the jobs to go on after the last restart")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{stall_report(farm, jobs)}") from None
    assert all_alive(), stall_report(farm, jobs)
    assert "hostname" not in farm.log("coordinator")


def stall_report(farm: ChaosFarm, jobs: list[uuid.UUID]) -> str:
    """What a stalled farm looks like: its trials by state, the broker's queues, and every
    component's last log lines (CI keeps no logs of its own)."""
    states = Counter(row.state for job in jobs for row in trial_rows(farm.database_url, job))
    with redis.Redis.from_url(farm.redis_url) as broker:  # the farm's own Redis
        queues = {key.decode(): broker.llen(key) for key in broker.scan_iter() if broker.type(key) == b"list"}
        unacked = broker.hlen("unacked")
    logs = "\n".join(f"--- {name} (alive: {alive(info.pid)})\n{_telling(farm.log(name))[-2500:]}"
                     for name, info in farm.processes.items())  # fmt: skip
    return f"trials by state: {dict(states)}; queues: {queues}; unacked: {unacked}\n{logs}"


def _telling(log: str) -> str:
    """A log without beat's once-a-second "Sending due task" lines: a stalled coordinator's last
    2,500 characters were nothing else in a CI failure (its consumer's lines had scrolled away)."""
    return "\n".join(line for line in log.splitlines() if "Scheduler: Sending due task" not in line)
