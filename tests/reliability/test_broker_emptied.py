"""A broker that lost its messages is noticed at once (fault run of issue 18): after a Redis flush
and restart, every queued trial is sent again at the coordinator's next housekeeping instead of
after redispatch_after_seconds (30 s by default; 300 s here, so only the new rule can pass)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from kernelfarm.core.db import session_scope
from kernelfarm.core.store.workers import live_workers
from kernelfarm.testing.chaos_farm import ChaosFarm
from tests.conftest import wait_for
from tests.reliability.conftest import make_job, trial_rows, valid_configs

SENTINEL = "kernelfarm:broker-holds-data"  # core/advance_requests.py


@pytest.fixture(scope="module")
def farm(own_farm: ChaosFarm) -> Iterator[ChaosFarm]:
    own_farm.extra_env["KERNELFARM_REDISPATCH_AFTER_SECONDS"] = "300"
    own_farm.start_coordinator()
    own_farm.start_worker()
    wait_for(lambda: _live(own_farm), 60, "a live worker")
    # The coordinator's first housekeeping marks the broker (and re-sends whatever was queued).
    wait_for(lambda: redis.Redis.from_url(own_farm.redis_url).exists(SENTINEL), 30, "the broker mark")
    time.sleep(3)  # that round sets the mark before it reads the queued trials: let it end
    yield own_farm


def _live(farm: ChaosFarm) -> bool:
    with session_scope(farm.database_url) as session:
        return bool(live_workers(session, 4.0))


def test_queued_trials_are_sent_again_right_after_the_broker_lost_them(farm: ChaosFarm) -> None:
    # Queued and "dispatched" trials whose messages are not in the broker: as after a flush.
    job_id, trial_ids = make_job(farm.database_url, valid_configs(4), parallelism=4)
    time.sleep(4)  # several housekeeping rounds: the broker still holds its data, so nothing is re-sent
    assert {row.state for row in trial_rows(farm.database_url, job_id)} == {"queued"}

    farm.flush_and_restart_redis()
    flushed = time.monotonic()
    wait_for(lambda: {r.state for r in trial_rows(farm.database_url, job_id)} == {"complete"}, 40,
             "the lost trials to be sent again and measured")  # fmt: skip
    assert time.monotonic() - flushed < 30
    assert [row.attempt for row in trial_rows(farm.database_url, job_id)] == [1] * len(trial_ids)
