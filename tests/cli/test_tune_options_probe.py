"""`tune`, `job`, `jobs` and `export` options an outside probe found mishandled: a `--top` (or `--limit`,
`--offset`) out of the API's bounds was refused by the API after the whole job had run ("error: limit:
Input should be greater than or equal to 1", exit 1 for a job that completed), an `--out` name too long
for the file system was an OSError traceback, and Ctrl-C while `tune` waited exited 130 without a word
about the job that keeps running on the farm.

Each runs the real CLI in a subprocess, against an address nobody listens on or a stand-in server
(tests/stand_in_server.py) that records what reached it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

from kernelfarm.api.routes import jobs as job_routes
from kernelfarm.commands.jobs import JOBS_PAGE_MAX, MAX_OFFSET, TRIALS_PAGE_MAX
from tests.cli.test_bad_arguments import kernelfarm, words
from tests.cli.test_unusable_requests_and_answers import TUNE, Recorder
from tests.sdk.hostile_server import job_document
from tests.stand_in_server import stand_in_server


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([*TUNE, "--top", "0"], "Invalid value for '--top': Input should be greater than or equal to 1"),
        ([*TUNE, "--top", "-1"], "Invalid value for '--top': Input should be greater than or equal to 1"),
        ([*TUNE, "--top", "5000"], "Invalid value for '--top': Input should be less than or equal to 1000"),
        (["job", "abcd", "--top", "0"], "Invalid value for '--top': Input should be greater than or equal to 1"),
        (["jobs", "--limit", "501"], "Invalid value for '--limit': Input should be less than or equal to 500"),
        (["jobs", "--offset", "-1"], "Invalid value for '--offset': Input should be greater than or equal to 0"),
    ],
)
def test_a_page_size_out_of_the_apis_bounds_is_a_usage_error_before_anything_runs(
    tmp_path: Path, args: list[str], says: str
) -> None:
    """`tune --top 0` ran the whole job, then said "error: limit: Input should be greater than or equal to 1"
    (the API's parameter, not the option) and exited 1 for a job that completed."""
    farm = Recorder(job_document())
    with stand_in_server(farm) as url:
        done = kernelfarm(tmp_path, *args, env={"KERNELFARM_API_URL": url})
    assert done.returncode == 2 and says in words(done.stderr), done.stderr[-2000:]
    assert farm.requests == []


def test_the_clis_page_bounds_are_the_apis() -> None:
    def bounds(route: Any, parameter: str) -> tuple[int, int]:
        query = typing.get_type_hints(route, include_extras=True)[parameter].__metadata__[0]
        ge = next(m.ge for m in query.metadata if hasattr(m, "ge"))
        le = next(m.le for m in query.metadata if hasattr(m, "le"))
        return ge, le

    assert bounds(job_routes.list_trials, "limit") == (1, TRIALS_PAGE_MAX)
    assert bounds(job_routes.list_jobs, "limit") == (1, JOBS_PAGE_MAX)
    assert bounds(job_routes.list_jobs, "offset") == (0, MAX_OFFSET)


def test_an_out_name_too_long_for_the_file_system_is_one_line(tmp_path: Path) -> None:
    out = "a" * 300
    done = kernelfarm(tmp_path, "export", "convolution_kernel", "--out", out)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr == f"error: cannot write {out}: File name too long\n"


def test_ctrl_c_while_tune_waits_says_the_job_keeps_running(tmp_path: Path) -> None:
    running = job_document(id="5f0c3a52-0000-4000-8000-000000000001")
    with stand_in_server(Recorder(running)) as url:
        env = {**os.environ, "KERNELFARM_STATE_DIR": str(tmp_path / "state"), "KERNELFARM_API_URL": url,
               "KERNELFARM_API_TOKEN": "unused", "PYTHONUNBUFFERED": "1"}  # fmt: skip
        tune = subprocess.Popen([sys.executable, "-P", "-m", "kernelfarm", *TUNE], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        try:
            assert tune.stdout is not None
            first = tune.stdout.readline()  # "job ID submitted: ..."
            assert "submitted" in first, first + (tune.stderr.read() if tune.stderr else "")
            tune.send_signal(signal.SIGINT)
            _, stderr = tune.communicate(timeout=60)
        finally:
            if tune.poll() is None:
                tune.kill()
                tune.wait()
    job_id = running["id"]
    assert tune.returncode == 130, stderr
    assert stderr == (f"interrupted: job {job_id} keeps running on the farm (`kernelfarm job {job_id}` shows it, "
                      f"`kernelfarm cancel {job_id}` cancels it)\n")  # fmt: skip
