"""A worker goes on from the trial it was sent to the job's next compiled queued trials, claiming
each while the one before it is measured: on the real schema, each trial is still counted once,
at most two are held at a time, and a soft time limit in the middle fails only its own trial.

The device is faked behind the Backend interface: replayed measurements, pulled the way the cuda
backend pulls them (the next request is taken before the current result is handed back, as the
measuring child has it queued)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator

import pytest
from sqlalchemy import create_engine, text

from kernelfarm.core.measurement import Measurement
from kernelfarm.testing.recordings import CONVOLUTION
from kernelfarm.worker import runner
from kernelfarm.worker.backends.base import KeepAlive, MeasureRequest
from kernelfarm.worker.backends.replay import ReplayBackend
from tests.reliability.conftest import make_job, trial_rows, valid_configs
from tests.reliability.test_compile_wait import config_key


class PipelinedReplay(ReplayBackend):
    """Replays; pulls request i+1 before handing back result i; hangs on the configs in ``hang``.
    Records, for every measurement, how many trials of the job were running (claimed) meanwhile."""

    def __init__(self, database_url: str, job_id: uuid.UUID, hang: set[str] | None = None) -> None:
        super().__init__([CONVOLUTION])
        self.database_url, self.job_id = database_url, job_id
        self.hang = hang or set()
        self.measured: list[str] = []
        self.running_while_measured: list[int] = []

    def measure(self, request: MeasureRequest, keep_alive: Callable[[], bool] | None = None) -> Measurement:
        key = config_key(request.config)
        if key in self.hang:
            time.sleep(30)  # interrupted by the soft time limit
        self.measured.append(key)
        return super().measure(request, keep_alive)

    def measure_stream(self, requests: Iterable[tuple[MeasureRequest, KeepAlive]]) -> Iterator[Measurement]:
        source = iter(requests)
        current = next(source, None)
        while current is not None:
            upcoming = next(source, None)  # claimed now, as the cuda backend queues it on its child
            result = self.measure(*current)
            self.running_while_measured.append(_running(self.database_url, self.job_id))
            yield result
            current = upcoming


def _running(database_url: str, job_id: uuid.UUID) -> int:
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            query = text("SELECT count(*) FROM trials WHERE job_id = :j AND state = 'running'")
            return int(connection.execute(query, {"j": str(job_id)}).scalar_one())
    finally:
        engine.dispose()


def evaluate(trial_id: int, backend: ReplayBackend, measure_batch: int, soft_time_limit: float = 60) -> runner.Outcome:
    steps: list[uuid.UUID] = []
    return runner.evaluate(trial_id, backend, "w-batch", None, 0.5, steps.append, soft_time_limit=soft_time_limit,
                           compile_ahead=16, measure_batch=measure_batch)  # fmt: skip


@pytest.mark.usefixtures("database_url")
def test_one_message_measures_a_batch_each_trial_counted_once(database_url: str) -> None:
    configs = valid_configs(6, offset=60)
    job_id, ids = make_job(database_url, configs, parallelism=6)
    backend = PipelinedReplay(database_url, job_id)

    outcome = evaluate(ids[0], backend, measure_batch=4)

    assert outcome.status == "recorded" and outcome.trial_id == ids[0]
    rows = {row.id: row for row in trial_rows(database_url, job_id)}
    # The sent trial and the next three queued ones, in queue order; the last two stay queued.
    assert backend.measured == [config_key(c) for c in configs[:4]]
    assert [rows[i].state for i in ids] == ["complete"] * 4 + ["queued"] * 2
    assert all(rows[i].attempt == 1 and rows[i].worker_name == "w-batch" for i in ids[:4])
    # While one was measured the next was already claimed, never more than that.
    assert backend.running_while_measured == [2, 2, 2, 1]
    # The batch's own messages, delivered later, find nothing to do; the rest are measured. The
    # job's last queued trial is not claimed ahead: an idle worker should not wait for it.
    for trial_id in ids[1:4]:
        assert evaluate(trial_id, backend, measure_batch=4).status == "skipped"
    assert evaluate(ids[4], backend, measure_batch=4).status == "recorded"
    assert [row.state for row in trial_rows(database_url, job_id)][5] == "queued"
    assert evaluate(ids[5], backend, measure_batch=4).status == "recorded"
    assert len(backend.measured) == 6 == len(set(backend.measured))
    assert all(row.state == "complete" and row.attempt == 1 for row in trial_rows(database_url, job_id))


@pytest.mark.usefixtures("database_url")
def test_measure_batch_one_measures_only_the_sent_trial(database_url: str) -> None:
    job_id, ids = make_job(database_url, valid_configs(3, offset=70), parallelism=3)
    backend = PipelinedReplay(database_url, job_id)
    assert evaluate(ids[0], backend, measure_batch=1).status == "recorded"
    assert [row.state for row in trial_rows(database_url, job_id)] == ["complete", "queued", "queued"]


@pytest.mark.usefixtures("database_url")
def test_a_soft_time_limit_fails_only_its_trial_and_the_batch_goes_on(database_url: str) -> None:
    configs = valid_configs(4, offset=80)
    job_id, ids = make_job(database_url, configs, parallelism=4)
    backend = PipelinedReplay(database_url, job_id, hang={config_key(configs[1])})

    started = time.monotonic()
    outcome = evaluate(ids[0], backend, measure_batch=3, soft_time_limit=2.0)

    assert outcome.status == "recorded" and time.monotonic() - started < 10
    rows = {row.id: row for row in trial_rows(database_url, job_id)}
    assert rows[ids[0]].state == "complete"
    assert rows[ids[1]].state == "failed" and rows[ids[1]].failure_kind == "timeout"
    # Claimed before the hang, measured after it in a fresh stream, once; the batch ended there.
    assert rows[ids[2]].state == "complete" and rows[ids[2]].attempt == 1
    assert rows[ids[3]].state == "queued"
    assert backend.measured == [config_key(configs[0]), config_key(configs[2])]
