"""`kernelfarm ci gate|recheck` (docs/CI.md) on what a pipeline may hand it: a --poll that is NaN,
negative, infinite or 0 (time.sleep raised a traceback once jobs were submitted, or the gate read the
farm without a pause); a --summary or --junit path that cannot be written (a traceback, after the
verdicts); a locale whose encoding is not UTF-8 (the reports were written in it while the JUnit XML
declares UTF-8, and printing the status icons raised); a farm answer that is not a Job, or an error
detail over lines (printed as is, over many lines).

Each runs the installed CLI as a subprocess. Passing and failing runs use the gate's FakeFarm
(tests/cli/test_gate_hardening.py); jobs that never finish and answers that are not a Job, which the
real farm never gives, come from a hostile server (tests/stand_in_server.py, tests/sdk/hostile_server.py)."""

from __future__ import annotations

import os
import subprocess
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_bad_arguments import kernelfarm, words
from tests.cli.test_gate_hardening import (
    PROBLEM,
    FakeFarm,
    junit_cases,
    served,
    table_rows,
    write_baseline,
    write_config,
)
from tests.sdk.hostile_server import BROKEN_JOB, BROKEN_JOB_REASONS, job_document
from tests.stand_in_server import StandInRequest, stand_in_server

# Python's UTF-8 mode starts by itself under LC_ALL=C; PYTHONUTF8=0 keeps the C locale's ASCII, as a
# runner with a non-UTF-8 locale (Latin-1, Windows' cp1252) has it.
ASCII_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}


@pytest.fixture
def farm() -> Iterator[FakeFarm]:
    """The gate's fake farm (its jobs complete at once), baseline and candidate at 2.0 ms: a pass."""
    fake = FakeFarm()
    fake.times.update(baseline=2.0, candidate=2.0)
    yield from served(fake)


def ci(
    tmp_path: Path, url: str | None, *args: str, command: str = "gate", problem: dict[str, Any] = PROBLEM,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``kernelfarm ci COMMAND`` of a one-entry config (timeout 1 s) in ``tmp_path`` against ``url``
    (None: an address nobody listens on)."""
    write_baseline(tmp_path, problem)
    config = write_config(tmp_path, problem, timeout=1)
    done = kernelfarm(tmp_path, "ci", command, str(config), "--run-id", "args", *args,
                      env={**({"KERNELFARM_API_URL": url} if url else {}), **(env or {})})  # fmt: skip
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return done


class NeverFinishing:
    """A farm whose jobs run forever; it records what was asked of it."""

    def __init__(self) -> None:
        self.requests: list[str] = []

    def __call__(self, request: StandInRequest) -> tuple[int, Any]:
        self.requests.append(f"{request.method} {request.path}")
        return (201 if request.method == "POST" else 200), job_document()


# ---------------------------------------------------------------------------------------------- --poll
@pytest.mark.parametrize(
    ("poll", "says"),
    [
        ("nan", "nan is not a finite number of seconds >= 0"),  # time.sleep: ValueError
        ("-1", "-1.0 is not a finite number of seconds >= 0"),  # time.sleep: ValueError
        ("inf", "inf is not a finite number of seconds >= 0"),  # time.sleep: OverflowError
        ("0", "0 would read the jobs' status without a pause: give more than 0"),  # read without a pause
    ],
)
@pytest.mark.parametrize("command", ["gate", "recheck"])
def test_a_poll_that_is_not_a_positive_number_is_a_usage_error(
    tmp_path: Path, command: str, poll: str, says: str
) -> None:
    farm = NeverFinishing()
    with stand_in_server(farm) as url:
        done = ci(tmp_path, url, "--poll", poll, "--summary", str(tmp_path / "summary.md"), command=command)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"Invalid value for --poll: {says}" in words(done.stderr), done.stderr
    assert farm.requests == [] and not (tmp_path / "summary.md").exists()  # refused before anything was sent


def test_a_poll_above_0_still_waits(tmp_path: Path) -> None:
    farm = NeverFinishing()
    with stand_in_server(farm) as url:
        done = ci(tmp_path, url, "--poll", "0.05")
    assert done.returncode == 2 and "still running" in done.stdout  # the 1 s timeout, polled
    assert farm.requests.count("GET /v1/jobs/job-1") > 1


# ---------------------------------------------------------------------------------------------- reports
@pytest.mark.parametrize(
    ("summary", "junit", "says"),
    [
        ("missing/summary.md", "junit.xml",
         "cannot write the report {tmp}/missing/summary.md: No such file or directory"),
        ("summary.md", ".", "cannot write the report {tmp}: Is a directory"),
        ("missing/summary.md", "missing/junit.xml",
         "cannot write the report {tmp}/missing/summary.md: No such file or directory; "
         "cannot write the report {tmp}/missing/junit.xml: No such file or directory"),
        ("summary\n.md/x", "junit.xml", "cannot write the report {tmp}/summary\\n.md/x: No such file or directory"),
    ],
    ids=["missing-folder", "a-directory", "both", "line-break"],
)  # fmt: skip
def test_a_report_that_cannot_be_written_is_one_line_after_the_verdicts(
    tmp_path: Path, farm: FakeFarm, summary: str, junit: str, says: str
) -> None:
    """Exit 2 (an error, docs/CI.md), the verdicts printed all the same and the other report written."""
    done = ci(tmp_path, farm.url, "--summary", str(tmp_path / summary), "--junit", str(tmp_path / junit))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == f"error: {says.format(tmp=tmp_path)}\n"
    assert "✅ pass" in done.stdout
    for name in (summary, junit):
        path = tmp_path / name
        assert path.is_dir() or not path.exists() or path.read_text(encoding="utf-8")


def test_a_report_replaces_the_previous_one_whole_and_a_pipe_is_written_through(tmp_path: Path, farm: FakeFarm) -> None:
    """A file is replaced atomically (no temporary file left beside it); a path that is not a file, such as
    /dev/stdout or a pipe a CI step reads, is written through."""
    summary, pipe = tmp_path / "summary.md", tmp_path / "junit.pipe"
    summary.write_text("the previous run's report, longer than this run's will be\n" * 100, encoding="utf-8")
    os.mkfifo(pipe)
    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append(pipe.read_bytes()))
    reader.start()
    try:
        done = ci(tmp_path, farm.url, "--summary", str(summary), "--junit", str(pipe))
    finally:
        if reader.is_alive():  # the command never opened the pipe: let the reader finish
            with pipe.open("wb"):
                pass
        reader.join(10)
    assert done.returncode == 0, done.stdout + done.stderr
    text = summary.read_text(encoding="utf-8")
    assert "previous run" not in text and "✅ pass" in text
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".summary", ".junit"))) == []
    root = ET.fromstring(read[0])  # fails on XML that is not well-formed
    [case] = root.findall("testsuite/testcase")
    assert case.get("name", "").startswith("matmul_fp32")


def test_a_report_that_fails_halfway_leaves_the_previous_one(tmp_path: Path) -> None:
    """A text UTF-8 cannot encode (a lone surrogate, which a JSON config's "\\ud800" escape gives) failed after
    the old file was truncated: the previous report was lost. Now the previous one stays, and no temporary."""
    from kernelfarm.commands.ci import _write_report

    summary = tmp_path / "summary.md"
    summary.write_text("the previous report\n", encoding="utf-8")
    says = _write_report(summary, "| name \ud800 | pass |\n")
    assert says is not None and says.startswith(f"cannot write the report {summary}:")
    assert summary.read_text(encoding="utf-8") == "the previous report\n"
    assert [p.name for p in tmp_path.iterdir()] == ["summary.md"]


def test_an_unwritable_report_after_a_regression_still_prints_the_regression(tmp_path: Path, farm: FakeFarm) -> None:
    farm.times.update(candidate=3.0)
    done = ci(tmp_path, farm.url, "--junit", str(tmp_path))
    assert done.returncode == 2 and done.stderr == f"error: cannot write the report {tmp_path}: Is a directory\n"
    assert "❌ regression" in done.stdout


@pytest.mark.parametrize(
    ("locale", "problem", "printed"),
    [
        (ASCII_LOCALE, PROBLEM, "\\u2705 pass"),  # the icon escaped: ASCII has no ✅
        ({"LC_ALL": "C"}, {"M": "größe ✓"}, "✅ pass"),  # Python's UTF-8 mode
        (ASCII_LOCALE, {"M": "größe ✓"}, "\\u2705 pass"),  # a UTF-8 config read under ASCII
    ],
    ids=["ascii", "c-locale-utf8-mode", "ascii-non-ascii-config"],
)
def test_reports_are_utf8_whatever_the_locale(
    tmp_path: Path, farm: FakeFarm, locale: dict[str, str], problem: dict[str, Any], printed: str
) -> None:
    summary, junit = tmp_path / "summary.md", tmp_path / "junit.xml"
    done = ci(tmp_path, farm.url, "--summary", str(summary), "--junit", str(junit), problem=problem, env=locale)
    assert done.returncode == 0, done.stdout + done.stderr
    assert printed in done.stdout
    name = f"matmul_fp32 [{','.join(f'{k}={v}' for k, v in problem.items())}] on nvidia-h100-80gb-hbm3"
    assert table_rows(summary)[1][:2] == [name, "✅ pass"]  # read as UTF-8 (markdown-it: the file's bytes)
    assert summary.read_bytes().decode("utf-8").count("✅ pass") == 1
    [case] = junit_cases(junit)  # ET reads the encoding the XML declares: UTF-8
    assert case.get("name") == name


# ---------------------------------------------------------------------------------------------- answers
def test_a_job_answer_that_is_not_a_job_is_one_line(tmp_path: Path) -> None:
    answers = {"POST": (201, job_document()), "GET": (200, BROKEN_JOB)}
    with stand_in_server(lambda request: answers[request.method]) as url:
        done = ci(tmp_path, url)
    assert done.returncode == 2
    assert done.stderr == f"error: the farm's answer to GET /v1/jobs/job-1 is not a Job: {BROKEN_JOB_REASONS}\n"


def test_a_submit_answer_that_is_not_a_job_is_one_line_in_the_reports(tmp_path: Path) -> None:
    with stand_in_server(lambda request: (201, BROKEN_JOB)) as url:
        done = ci(tmp_path, url, "--junit", str(tmp_path / "junit.xml"))
    assert done.returncode == 2
    for case in junit_cases(tmp_path / "junit.xml"):
        error = case.find("error")
        assert error is not None and error.get("message") == (
            f"the farm refused the job: the farm's answer to POST /v1/jobs is not a Job: {BROKEN_JOB_REASONS}"
        )


def test_an_error_detail_over_lines_is_one_line(tmp_path: Path) -> None:
    answers = {"POST": (201, job_document()), "GET": (500, {"detail": "down\nfor maintenance"})}
    with stand_in_server(lambda request: answers[request.method]) as url:
        done = ci(tmp_path, url)
    assert done.returncode == 2 and done.stderr == "error: down\\nfor maintenance\n"
