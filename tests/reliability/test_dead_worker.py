"""A dead worker process frees its trials within one housekeeping tick; a stuck one keeps them until
its lease runs out (core/store/workers.py: presence locks). Real processes, kill -9 and SIGSTOP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from kernelfarm.core.celery_app import make_celery
from kernelfarm.core.db import session_scope
from kernelfarm.core.dead_deliveries import CLAIM_GRACE_S
from kernelfarm.core.settings import Settings
from kernelfarm.core.store.jobs import cancel_job
from kernelfarm.services import wait_for
from kernelfarm.testing.chaos_farm import ChaosFarm
from tests.reliability.conftest import (
    QUEUE,
    make_job,
    ready_coordinator,
    ready_worker,
    send_evaluate,
    started_farm,
    terminal_transitions,
    trial_rows,
    valid_configs,
)

# Leases far longer than a housekeeping tick (1 s here): only the presence rule can free a trial fast.
LONG_LEASE = "40"
VERY_LONG_LEASE = "600"


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosFarm]:
    directory = Path(tmp_path_factory.mktemp("dead-worker"))
    with started_farm(directory, extra_env={"KERNELFARM_LEASE_SECONDS": LONG_LEASE}) as farm:
        yield farm


def busy_with_a_trial(farm: ChaosFarm, offset: int) -> tuple[uuid.UUID, int, str, str]:
    """A worker measuring a trial for a minute, then an idle worker beside it: (job, trial, the busy
    worker's name, the idle one's)."""
    busy = ready_worker(farm, sleep_ms=60_000)
    job_id, (trial_id,) = make_job(farm.database_url, valid_configs(1, offset=offset))
    send_evaluate(farm, trial_id)
    wait_for(lambda: trial_rows(farm.database_url, job_id)[0].state == "running", 60, "the trial to start")
    idle = ready_worker(farm, sleep_ms=100)  # only now: it must not take the trial first
    return job_id, trial_id, busy.name, idle.name


def test_a_killed_worker_frees_its_trial_long_before_its_lease(farm: ChaosFarm) -> None:
    ready_coordinator(farm)
    job_id, trial_id, busy, idle = busy_with_a_trial(farm, offset=0)
    try:
        killed = time.monotonic()
        farm.kill(busy, signal.SIGKILL)
        row = wait_for(lambda: (r := trial_rows(farm.database_url, job_id)[0]).state == "complete" and r, 30,
                       "the trial to finish on the other worker")  # fmt: skip
        assert time.monotonic() - killed < float(LONG_LEASE) / 2  # not the lease: it has 40 s
        assert row.attempt == 2 and row.worker_name.startswith(f"{idle}@")
        assert terminal_transitions(farm.database_url, trial_id) == 1
        assert "gone (presence lock released)" in farm.component_log("coordinator")
    finally:
        farm.kill("coordinator")
        farm.kill(idle)


def requeued_at(database_url: str, trial_id: int) -> float | None:
    """When (epoch seconds, database clock) the trial's first attempt went back to the queue."""
    engine = create_engine(database_url)
    with engine.connect() as connection:
        at = connection.execute(
            text("SELECT extract(epoch FROM at) FROM chaos_trial_transitions WHERE trial_id = :t AND attempt = 1 "
                 "AND old_state = 'running' AND new_state = 'queued'"), {"t": trial_id}
        ).scalar()  # fmt: skip
    engine.dispose()
    return None if at is None else float(at)


def test_a_killed_workers_trial_is_requeued_within_a_housekeeping_tick(farm: ChaosFarm) -> None:
    # The default heartbeat (2 s): before, a worker whose lock was gone also had to be silent for
    # 3 heartbeats, so its trial waited 6 s and up to a tick more. Its lock was taken after the
    # server's epoch, so now the next tick (every 1 s here) requeues it.
    farm.extra_env["KERNELFARM_HEARTBEAT_SECONDS"] = "2"
    ready_coordinator(farm)
    job_id, trial_id, busy, idle = busy_with_a_trial(farm, offset=12)
    try:
        time.sleep(2.5)  # a heartbeat after the claim: the silence rule alone would need 6 s from here
        killed = time.time()
        farm.kill(busy, signal.SIGKILL)
        at = wait_for(lambda: requeued_at(farm.database_url, trial_id), 30, "the trial to be requeued")
        assert at - killed < 3.0, f"requeued {at - killed:.1f} s after the kill"  # 1 s ticks; was >= 6 s
        wait_for(lambda: trial_rows(farm.database_url, job_id)[0].state == "complete", 30, "the trial to finish")
        assert terminal_transitions(farm.database_url, trial_id) == 1
    finally:
        farm.extra_env.pop("KERNELFARM_HEARTBEAT_SECONDS")
        farm.kill("coordinator")
        farm.kill(idle)


def test_the_presence_sweep_requeues_a_killed_workers_trial_between_housekeeping_ticks(farm: ChaosFarm) -> None:
    # Housekeeping every 30 s (it runs once as the coordinator starts, then not in this test): only
    # the presence sweep (every 0.5 s here) can requeue the trial within seconds of the kill.
    farm.extra_env |= {"KERNELFARM_REAP_INTERVAL_SECONDS": "30", "KERNELFARM_PRESENCE_SWEEP_SECONDS": "0.5"}
    ready_coordinator(farm)
    job_id, trial_id, busy, idle = busy_with_a_trial(farm, offset=16)
    try:
        killed = time.time()
        farm.kill(busy, signal.SIGKILL)
        at = wait_for(lambda: requeued_at(farm.database_url, trial_id), 30, "the trial to be requeued")
        assert at - killed < 5.0, f"requeued {at - killed:.1f} s after the kill"  # the next tick: 30 s
        wait_for(lambda: trial_rows(farm.database_url, job_id)[0].state == "complete", 30, "the trial to finish")
        assert terminal_transitions(farm.database_url, trial_id) == 1
        assert "tuner.presence_sweep" in farm.component_log("coordinator")
    finally:
        for name in ("KERNELFARM_REAP_INTERVAL_SECONDS", "KERNELFARM_PRESENCE_SWEEP_SECONDS"):
            farm.extra_env.pop(name)
        farm.kill("coordinator")
        farm.kill(idle)


def unstopped_workers(database_url: str) -> int:
    engine = create_engine(database_url)
    with engine.connect() as connection:
        count = connection.execute(text("SELECT count(*) FROM gpu_workers WHERE stopped_at IS NULL")).scalar_one()
    engine.dispose()
    return int(count)


# Connected first, then it says "ready" and takes the message when a line arrives on stdin: taking it is
# then one Redis round trip, not a Python start (which took 1.9 s on a loaded 2-core machine).
TAKE_AND_DIE = """
import json, os, sys
from kernelfarm.core.celery_app import make_celery
from kernelfarm.core.settings import Settings
app = make_celery(Settings(database_url=sys.argv[1], redis_url=sys.argv[2]))
with app.connection_for_write() as connection:
    channel = connection.default_channel
    print("ready", flush=True)
    sys.stdin.readline()
    message = channel.basic_get(sys.argv[3], no_ack=False)
    assert message is not None and json.loads(message.body)[0] == [int(sys.argv[4])], message and message.body
    os._exit(0)  # dies holding it: no acknowledgement, and no restore as the connection closes
"""


@contextmanager
def message_taker(farm: ChaosFarm, trial_id: int) -> Iterator[subprocess.Popen[str]]:
    """A process, connected to the broker, that takes the trial's message and dies holding it once
    ``take_now`` tells it to."""
    argv = [sys.executable, "-c", TAKE_AND_DIE, farm.database_url, farm.redis_url, QUEUE, str(trial_id)]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as taker:
        try:
            assert taker.stdout is not None and taker.stdout.readline() == "ready\n"
            yield taker
        finally:
            taker.kill()


def take_now(taker: subprocess.Popen[str]) -> None:
    assert taker.stdin is not None
    taker.stdin.write("\n")
    taker.stdin.flush()
    assert taker.wait(timeout=60) == 0


def presence_events(farm: ChaosFarm) -> list[str]:
    """The coordinator's log lines on workers found gone and taken messages restored."""
    lines = farm.component_log("coordinator").splitlines()
    return [line for line in lines if "worker(s) gone" in line or "message(s) a gone worker" in line]


def housekeeping_succeeded(farm: ChaosFarm) -> bool:
    lines = farm.component_log("coordinator").splitlines()
    return any("tuner.housekeeping" in line and "succeeded" in line for line in lines)


def drop_leftover_messages(farm: ChaosFarm) -> None:
    """Empty the GPU queue of what the tests before left there: a trial requeued from a killed worker
    is sent again, and the killed worker's own delivery is restored too, so a duplicate can wait in
    the queue once its trial is complete and the worker that would have taken it is killed. Taken
    in the test's place, it left the test's own message to a live worker (a run in CI). The module's
    own Redis: nothing of anyone else's."""
    app = make_celery(Settings(database_url=farm.database_url, redis_url=farm.redis_url))
    with app.connection_for_write() as connection:
        connection.default_channel.queue_purge(QUEUE)
    app.close()


@contextmanager
def restoring_coordinator(farm: ChaosFarm) -> Iterator[list[str]]:
    """A coordinator sweeping every 0.5 s, with the re-send of unclaimed work a minute away, once no
    worker has been found gone for longer than the restore looks after one: its first housekeeping
    (the first against a broker re-sends every queued trial: it cannot know the broker kept them) is
    over, every worker the tests before killed was found gone long enough ago, and the messages they
    left in the queue are dropped. Yields a list for the test's workers, killed after it with the
    coordinator."""
    farm.extra_env |= {"KERNELFARM_REDISPATCH_AFTER_SECONDS": "60", "KERNELFARM_PRESENCE_SWEEP_SECONDS": "0.5"}
    ready_coordinator(farm)
    workers: list[str] = []
    try:
        wait_for(lambda: housekeeping_succeeded(farm), 60, "the first housekeeping")
        wait_for(lambda: unstopped_workers(farm.database_url) == 0, 60, "earlier workers found gone")
        time.sleep(CLAIM_GRACE_S + 2.0)
        drop_leftover_messages(farm)
        yield workers
    finally:
        for name in ("KERNELFARM_REDISPATCH_AFTER_SECONDS", "KERNELFARM_PRESENCE_SWEEP_SECONDS"):
            farm.extra_env.pop(name)
        farm.kill("coordinator")
        for name in workers:
            farm.kill(name)


def test_a_message_a_dead_worker_took_before_claiming_goes_back_at_once(farm: ChaosFarm) -> None:
    # A worker that dies between taking a message and claiming its trial: nothing is running under
    # its name, so only the message itself (in Redis's unacked set) says the trial was taken. With
    # the re-send of unclaimed work a minute away, only its restore brings the trial back soon.
    with restoring_coordinator(farm) as workers:
        job_id, (trial_id,) = make_job(farm.database_url, valid_configs(1, offset=20))
        send_evaluate(farm, trial_id)
        with message_taker(farm, trial_id) as taker:
            take_now(taker)
        time.sleep(2.5)  # older than the grace a live worker has to claim
        workers += [ready_worker(farm, sleep_ms=100).name for _ in range(2)]
        state = trial_rows(farm.database_url, job_id)[0].state
        # nobody has its message. Once (CI) the trial was already complete here: the helper had taken
        # an earlier test's leftover message instead (drop_leftover_messages; it now checks which)
        assert state == "queued", f"the trial is {state} before any worker was killed: {presence_events(farm)}"
        killed = time.monotonic()
        farm.kill(workers.pop(), signal.SIGKILL)  # a worker found gone: the sweep looks for taken messages
        wait_for(lambda: trial_rows(farm.database_url, job_id)[0].state == "complete", 30, "the trial to finish")
        assert time.monotonic() - killed < 20  # the re-send of unclaimed work would take 60 s
        assert "restored 1 message(s)" in farm.component_log("coordinator")
        assert terminal_transitions(farm.database_url, trial_id) == 1


def test_a_message_taken_just_before_its_worker_died_goes_back_once_old_enough(farm: ChaosFarm) -> None:
    # As above, but the message is taken the moment a worker is killed: when the sweep finds that
    # worker gone the message is younger than the claim grace (a live worker may be about to claim
    # it). The sweeps after it look again; before, only a newly found worker started a look, and the
    # message waited for the re-send of unclaimed work (a minute here, 30 s by default).
    with restoring_coordinator(farm) as workers:
        doomed = ready_worker(farm, sleep_ms=100).name
        job_id, (trial_id,) = make_job(farm.database_url, valid_configs(1, offset=24))
        with message_taker(farm, trial_id) as taker:
            killed = time.monotonic()
            farm.kill(doomed, signal.SIGKILL)
            send_evaluate(farm, trial_id)
            take_now(taker)
        assert time.monotonic() - killed < 1.5  # taken well within the grace of the kill
        workers.append(ready_worker(farm, sleep_ms=100).name)  # to measure it once it is back
        wait_for(lambda: trial_rows(farm.database_url, job_id)[0].state == "complete", 40, "the trial to finish")
        assert time.monotonic() - killed < 20  # the re-send of unclaimed work would take 60 s
        assert terminal_transitions(farm.database_url, trial_id) == 1


def test_a_stopped_worker_keeps_its_trial_until_the_lease_runs_out(farm: ChaosFarm) -> None:
    farm.extra_env["KERNELFARM_LEASE_SECONDS"] = "10"  # the coordinator's reaper reads it
    ready_coordinator(farm)
    job_id, trial_id, busy, idle = busy_with_a_trial(farm, offset=5)
    busy_pid = farm.processes[busy].pid
    try:
        os.killpg(busy_pid, signal.SIGSTOP)  # hung, not dead: its connections (and lock) stay open
        stopped = time.monotonic()
        time.sleep(6)  # six housekeeping ticks, well inside the 10 s lease
        row = trial_rows(farm.database_url, job_id)[0]
        assert row.state == "running" and row.attempt == 1 and row.worker_name.startswith(f"{busy}@")
        row = wait_for(lambda: (r := trial_rows(farm.database_url, job_id)[0]).state == "complete" and r, 60,
                       "the lease to run out and the trial to finish elsewhere")  # fmt: skip
        assert time.monotonic() - stopped >= 10 - 1  # the lease, by the database clock
        assert row.attempt == 2 and row.worker_name.startswith(f"{idle}@")
        assert terminal_transitions(farm.database_url, trial_id) == 1
    finally:
        farm.extra_env["KERNELFARM_LEASE_SECONDS"] = LONG_LEASE
        with session_scope(farm.database_url) as session:
            cancel_job(session, job_id)
        os.killpg(busy_pid, signal.SIGCONT)
        farm.kill(busy)
        farm.kill("coordinator")
        farm.kill(idle)


def lease_ended(database_url: str, trial_id: int) -> Any:
    """The trial's row once its lease has been ended early (lease_ended_at set), else None."""
    engine = create_engine(database_url)
    with engine.connect() as connection:
        row = connection.execute(
            text("SELECT state, attempt FROM trials WHERE id = :t AND lease_ended_at IS NOT NULL"), {"t": trial_id}
        ).first()  # fmt: skip
    engine.dispose()
    return row


def test_a_worker_restarted_under_its_name_ends_the_leases_its_dead_process_left(farm: ChaosFarm) -> None:
    # No coordinator while the worker dies and comes back: when housekeeping runs, the name's lock is
    # held again (by the new process), so only the new process's start-up can free the old trial.
    first = ready_worker(farm, sleep_ms=60_000)
    job_id, (trial_id,) = make_job(farm.database_url, valid_configs(1, offset=8))
    send_evaluate(farm, trial_id)
    wait_for(lambda: trial_rows(farm.database_url, job_id)[0].state == "running", 60, "the trial to start")
    killed = time.monotonic()
    farm.kill(first.name, signal.SIGKILL)
    again = ready_worker(farm, sleep_ms=100, name=first.name)
    # The coordinator started below judges leases by its own setting: ten minutes, so that however long
    # the two start-ups take on a loaded machine (15-21 s each seen), a lease run out cannot be what
    # frees the trial. (Timing from the kill against 40 s counted both start-ups and failed at 20.03 s.)
    farm.extra_env["KERNELFARM_LEASE_SECONDS"] = VERY_LONG_LEASE
    try:
        ended = wait_for(lambda: lease_ended(farm.database_url, trial_id), 60, "the new process to end the lease")
        assert ended.state == "running" and ended.attempt == 1  # ended by the worker, not yet requeued
        ready_coordinator(farm)  # its reaper requeues the trial whose lease the new process ended
        row = wait_for(lambda: (r := trial_rows(farm.database_url, job_id)[0]).state == "complete" and r, 60,
                       "the trial to finish on the restarted worker")  # fmt: skip
        assert time.monotonic() - killed < float(VERY_LONG_LEASE)
        assert row.attempt == 2 and row.worker_name.startswith(f"{first.name}@")
        assert terminal_transitions(farm.database_url, trial_id) == 1
        assert "of an earlier" in farm.component_log(again.name)
    finally:
        farm.extra_env["KERNELFARM_LEASE_SECONDS"] = LONG_LEASE
        farm.kill("coordinator")
        farm.kill(again.name)
