"""While the trial a worker was sent still compiles, the worker measures the job's queued trials
that are compiled already: on the real schema, each trial still counted exactly once.

The compiler is the hardware-side part here, so it is faked behind the Backend interface: a replay
backend whose kernels become "compiled" a set time after ``prepare`` saw them."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from kernelfarm.core.measurement import Measurement
from kernelfarm.testing.recordings import CONVOLUTION
from kernelfarm.worker import runner
from kernelfarm.worker.backends.base import MeasureRequest
from kernelfarm.worker.backends.replay import ReplayBackend
from tests.reliability.conftest import make_job, trial_rows, valid_configs


class SlowCompileBackend(ReplayBackend):
    """Replay measurements; each config compiles for ``compile_s[key]`` seconds (default 0) from the
    first time it is prepared, and measure() waits for its compile, like the cuda backend."""

    def __init__(self, compile_s: dict[str, float]) -> None:
        super().__init__([CONVOLUTION])
        self.compile_s = compile_s
        self.started: dict[str, float] = {}
        self.measured: list[str] = []
        self._lock = threading.Lock()

    @staticmethod
    def key(request: MeasureRequest) -> str:
        return config_key(request.config)

    def prepare(self, requests: list[MeasureRequest]) -> None:
        with self._lock:
            for request in requests:
                self.started.setdefault(self.key(request), time.monotonic())

    def ready(self, request: MeasureRequest) -> bool:
        key = self.key(request)
        with self._lock:
            started = self.started.get(key)
        return started is not None and time.monotonic() - started >= self.compile_s.get(key, 0.0)

    def measure(self, request: MeasureRequest, keep_alive: Callable[[], bool] | None = None) -> Measurement:
        self.prepare([request])
        while not self.ready(request):
            time.sleep(0.01)
        self.measured.append(self.key(request))
        return super().measure(request, keep_alive)


def config_key(config: Mapping[str, Any]) -> str:
    return ",".join(str(config[k]) for k in sorted(config))


def job_with_first_trial_compiling(
    database_url: str, n: int, offset: int, compile_s: float
) -> tuple[uuid.UUID, list[int], str, SlowCompileBackend]:
    """A job of ``n`` queued trials; the first one's kernel takes ``compile_s`` to compile."""
    configs = valid_configs(n, offset=offset)
    job_id, ids = make_job(database_url, configs, parallelism=n)
    return job_id, ids, config_key(configs[0]), SlowCompileBackend({config_key(configs[0]): compile_s})


def run(trial_id: int, backend: SlowCompileBackend, compile_ahead: int) -> runner.Outcome:
    steps: list[Any] = []
    return runner.evaluate(trial_id, backend, "w-compile", None, 0.5, steps.append, soft_time_limit=60,
                           compile_ahead=compile_ahead)  # fmt: skip


@pytest.mark.usefixtures("database_url")
def test_compiled_trials_are_measured_while_the_sent_one_compiles(database_url: str) -> None:
    job_id, ids, slow_key, backend = job_with_first_trial_compiling(database_url, 5, offset=40, compile_s=1.0)

    outcome = run(ids[0], backend, compile_ahead=8)

    assert outcome.status == "recorded"
    rows = {row.id: row for row in trial_rows(database_url, job_id)}
    assert all(rows[i].state == "complete" and rows[i].attempt == 1 for i in ids)
    assert all(rows[i].worker_name == "w-compile" for i in ids)
    # The four compiled ones ran during the second of compiling; the sent one last.
    assert backend.measured[-1] == slow_key and len(backend.measured) == 5
    assert all(rows[i].finished_at < rows[ids[0]].finished_at for i in ids[1:])
    # Their own messages, delivered later, find nothing to do: each trial was counted once.
    for trial_id in ids[1:]:
        assert run(trial_id, backend, compile_ahead=8).status == "skipped"
    assert len(backend.measured) == 5


@pytest.mark.usefixtures("database_url")
def test_without_compile_ahead_or_with_everything_compiled_only_the_sent_trial_runs(database_url: str) -> None:
    _, ids, slow_key, backend = job_with_first_trial_compiling(database_url, 3, offset=50, compile_s=0.3)
    assert run(ids[0], backend, compile_ahead=0).status == "recorded"
    assert backend.measured == [slow_key]  # no look-ahead: the worker waited for its own compile

    backend = SlowCompileBackend({})  # everything compiles instantly: nothing to fill
    assert run(ids[1], backend, compile_ahead=8).status == "recorded"
    assert len(backend.measured) == 1
