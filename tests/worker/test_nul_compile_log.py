"""A compiler log with NUL characters (ptxas wrote one on an H100) ends its trial as ``compile`` on
the first attempt: the worker's runner writes the result to the real schema, which refuses NUL in
text and jsonb unless the store cleans it.

The GPU is the faked part: a backend whose "compiler" fails with a NUL-bearing log, behind the
Backend interface, reporting it the way the cuda backend's staging does (the log as the failure
message, compile metrics, provenance)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from kernelfarm.core.measurement import Measurement
from kernelfarm.core.states import FailureKind
from kernelfarm.core.store.text import NUL_MARK, storable
from kernelfarm.worker import runner
from kernelfarm.worker.backends.base import MeasureRequest
from kernelfarm.worker.backends.fake import FakeBackend
from tests.reliability.conftest import make_job, trial_rows, valid_configs

# The shape of the log seen on the H100: ptxas' error, then NUL padding from a fixed-size buffer.
PTXAS_LOG = (
    "ptxas error   : Entry function 'kf_matmul_fp32' uses too much shared data (0x10400 bytes, 0xc000 max)\x00\x00"
)


class NulLogCompiler(FakeBackend):
    """Every config "fails to compile" with :data:`PTXAS_LOG`."""

    def measure(self, request: MeasureRequest, keep_alive: Callable[[], bool] | None = None) -> Measurement:
        return Measurement.failed(
            FailureKind.COMPILE,
            PTXAS_LOG,
            metrics={"compile_s": 0.5, "compile_cached": False, "compile_log_tail": PTXAS_LOG[-40:]},
            provenance={"backend": "nul-log-compiler", "compile_options": ["-DNAME=\x00"], "note\x00": 1},
        )


@pytest.mark.usefixtures("database_url")
def test_a_nul_bearing_compile_log_ends_the_trial_as_compile_on_the_first_attempt(database_url: str) -> None:
    job_id, (trial_id,) = make_job(database_url, valid_configs(1, offset=70), parallelism=1)
    steps: list[Any] = []

    started = time.monotonic()
    outcome = runner.evaluate(trial_id, NulLogCompiler(), "w-nul", None, 0.5, steps.append, soft_time_limit=60)
    elapsed = time.monotonic() - started

    assert outcome.status == "recorded"
    (row,) = [r for r in trial_rows(database_url, job_id) if r.id == trial_id]
    assert (row.state, row.failure_kind, row.attempt) == ("failed", "compile", 1)
    assert row.failure_message == PTXAS_LOG.replace("\x00", NUL_MARK)
    assert steps == [job_id]
    assert elapsed < 10  # written at once, not retried as a database outage


def test_storable_replaces_nul_at_any_depth_and_keeps_everything_else() -> None:
    value = {"a\x00": ["x\x00y", ("z\x00",), 3, 1.5, None, True], "b": {"c": "\x00"}}
    assert storable(value) == {
        f"a{NUL_MARK}": [f"x{NUL_MARK}y", (f"z{NUL_MARK}",), 3, 1.5, None, True],
        "b": {"c": NUL_MARK},
    }
    assert storable("clean") == "clean" and storable(None) is None


def test_a_statement_the_server_refuses_is_not_retried_as_an_outage() -> None:
    from sqlalchemy.exc import DataError

    from kernelfarm.worker.db_retry import with_db_retry

    calls = {"n": 0}

    def refused() -> None:
        calls["n"] += 1
        raise DataError("UPDATE trials ...", {}, Exception("invalid byte sequence"))

    started = time.monotonic()
    with pytest.raises(DataError):
        with_db_retry("test", refused, deadline_seconds=30)
    assert calls["n"] == 1 and time.monotonic() - started < 1
