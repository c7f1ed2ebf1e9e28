"""Each Celery setting of core/celery_app.py doing its job, shown on real worker processes.

Worker faults are kill -9. Servers are the suite's own embedded ones (own_farm)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis
from celery.exceptions import SoftTimeLimitExceeded

from kernelfarm.core.celery_app import check_timing_invariants, make_celery
from kernelfarm.core.db import session_scope
from kernelfarm.core.settings import Settings
from kernelfarm.core.store.jobs import cancel_job
from kernelfarm.services import wait_for
from kernelfarm.testing.chaos_farm import ChaosFarm
from kernelfarm.worker.time_limits import HARD_LIMIT_EXIT_CODE, TimeLimits
from tests.reliability.conftest import (
    QUEUE,
    make_job,
    ready_coordinator,
    ready_worker,
    send_evaluate,
    terminal_transitions,
    trial_rows,
    valid_configs,
)

# Short limits so they are observable: soft < hard < visibility timeout, as the invariant demands.
SHORT_LIMITS = {"KERNELFARM_TRIAL_SOFT_TIME_LIMIT": "4", "KERNELFARM_TRIAL_HARD_TIME_LIMIT": "5",
                "KERNELFARM_VISIBILITY_TIMEOUT": "6"}  # fmt: skip


def settings(**values: Any) -> Settings:
    return Settings(redis_url="redis://127.0.0.1:1/0", database_url="postgresql://x@127.0.0.1:1/x", **values)


def test_settings_for_must_not_be_lost_tasks() -> None:
    app = make_celery(settings())
    conf = app.conf
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert conf.worker_prefetch_multiplier == 1
    assert 0 < conf.task_soft_time_limit < conf.task_time_limit < conf.broker_transport_options["visibility_timeout"]


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ({"visibility_timeout": 660}, "visibility_timeout"),  # == hard limit: Redis would redeliver a running trial
        ({"visibility_timeout": 100}, "visibility_timeout"),
        ({"trial_soft_time_limit": 660}, "soft"),
        ({"lease_seconds": 1.0, "heartbeat_seconds": 2.0}, "lease_seconds"),
    ],
)
def test_timing_invariants_fail_fast(values: dict[str, object], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        check_timing_invariants(settings(**values))
    with pytest.raises(ValueError, match=reason):
        make_celery(settings(**values))  # every component builds its app here, so none starts


def unacked_messages(farm: ChaosFarm) -> list[bytes | str]:
    """Messages reserved by GPU workers. Only the GPU queue's: a coordinator left running by an
    earlier test of this module may hold tuner.advance messages of its own at any moment."""
    values = redis.Redis.from_url(farm.redis_url).hvals("unacked")
    return [v for v in values if json.loads(v)[2] == QUEUE]


def queued_messages(farm: ChaosFarm) -> int:
    client = redis.Redis.from_url(farm.redis_url)
    return sum(int(client.llen(key)) for key in client.keys(f"{QUEUE}*"))


def wait_state(farm: ChaosFarm, job_id: uuid.UUID, index: int, state: str, timeout: float = 60) -> Any:
    return wait_for(lambda: (r := trial_rows(farm.database_url, job_id)[index]).state == state and r, timeout,
                    f"trial {index} to be {state}")  # fmt: skip


def test_acks_late_kill9_mid_trial_keeps_the_message_and_counts_the_trial_once(own_farm: ChaosFarm) -> None:
    first = ready_worker(own_farm, sleep_ms=3000, **SHORT_LIMITS)
    job_id, (trial_id,) = make_job(own_farm.database_url, valid_configs(1))
    send_evaluate(own_farm, trial_id)
    wait_state(own_farm, job_id, 0, "running")
    own_farm.kill(first.name, signal.SIGKILL)
    # acks_late: the message was not acknowledged on receipt, so it survives its worker in Redis.
    assert len(unacked_messages(own_farm)) == 1 and queued_messages(own_farm) == 0

    time.sleep(6.5)  # past the visibility timeout: a consumer that starts now restores the message
    second = ready_worker(own_farm, sleep_ms=3000, **SHORT_LIMITS)
    # Redelivered, but the trial is still leased by the dead worker's attempt: the claim refuses it.
    wait_for(lambda: "not claimable" in own_farm.log(second.name), 60, "the redelivered message")
    assert unacked_messages(own_farm) == []
    ready_coordinator(own_farm)  # its reaper returns the expired lease to the queue and re-sends it
    try:
        row = wait_state(own_farm, job_id, 0, "complete", timeout=90)
        assert row.attempt == 2 and row.worker_name.split("@")[0] == second.name
        assert terminal_transitions(own_farm.database_url, trial_id) == 1
    finally:
        own_farm.kill("coordinator")
        own_farm.kill(second.name)


def test_prefetch_one_leaves_the_next_trial_for_another_worker(own_farm: ChaosFarm) -> None:
    busy = ready_worker(own_farm, sleep_ms=60_000)  # busy for the whole test
    job_id, trial_ids = make_job(own_farm.database_url, valid_configs(2, offset=10))
    for trial_id in trial_ids:
        send_evaluate(own_farm, trial_id)
    wait_state(own_farm, job_id, 0, "running")
    time.sleep(1.0)
    # prefetch 1: the busy worker reserved only the trial it runs; the next one waits in the queue
    assert queued_messages(own_farm) == 1 and len(unacked_messages(own_farm)) == 1
    idle = ready_worker(own_farm, sleep_ms=100)
    try:
        second = wait_state(own_farm, job_id, 1, "complete", timeout=60)
        first = trial_rows(own_farm.database_url, job_id)[0]
        assert second.worker_name.split("@")[0] == idle.name and first.worker_name.split("@")[0] == busy.name
        assert first.state == "running"  # the second trial finished while the first was still measured
    finally:
        with session_scope(own_farm.database_url) as session:
            cancel_job(session, job_id)  # so no later test's reaper finds the abandoned lease
        own_farm.kill(busy.name)
        own_farm.kill(idle.name)


def test_soft_time_limit_records_a_timeout_and_the_worker_lives_on(own_farm: ChaosFarm) -> None:
    # The solo pool ignores Celery's time limits; the runner enforces the configured ones itself.
    slow = ready_worker(own_farm, sleep_ms=20_000, **SHORT_LIMITS)
    try:
        job_id, (trial_id,) = make_job(own_farm.database_url, valid_configs(1, offset=20))
        send_evaluate(own_farm, trial_id)
        row = wait_state(own_farm, job_id, 0, "failed", timeout=60)
        assert row.failure_kind == "timeout" and "soft time limit" in row.failure_message
        assert (row.finished_at - row.started_at).total_seconds() < 10
        assert psutil.pid_exists(slow.pid) and psutil.Process(slow.pid).status() != psutil.STATUS_ZOMBIE
    finally:
        own_farm.kill(slow.name)


def test_soft_limit_raises_in_the_measuring_thread_and_restores_outer_timers() -> None:
    started = time.monotonic()
    with pytest.raises(SoftTimeLimitExceeded), TimeLimits(0.2, None):
        time.sleep(5)
    assert time.monotonic() - started < 2


def test_hard_time_limit_ends_a_stuck_process() -> None:
    # Imported from wherever TimeLimits lives in the installed package, never from the working directory.
    code = f"import time\nfrom {TimeLimits.__module__} import TimeLimits\nwith TimeLimits(None, 0.5): time.sleep(30)"
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, timeout=60)
    assert result.returncode == HARD_LIMIT_EXIT_CODE and time.monotonic() - started < 20


def test_worker_is_one_solo_process_without_cuda_or_children(own_farm: ChaosFarm) -> None:
    info = ready_worker(own_farm)
    try:
        process = psutil.Process(info.pid)  # the CLI exec'd celery: same pid, no fork
        argv = process.cmdline()
        assert argv[argv.index("-A") + 1] == "kernelfarm.worker.tasks" and argv[argv.index("--pool") + 1] == "solo"
        assert process.children(recursive=True) == []
        maps = Path(f"/proc/{info.pid}/maps").read_text()
        assert "libcuda" not in maps  # replay worker; a cuda worker creates its context after exec
    finally:
        own_farm.kill(info.name)
