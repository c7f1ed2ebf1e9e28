"""`kernelfarm ci gate` and `ci recheck` (docs/CI.md) on answers and inputs an outside probe found them
mishandling: a best time that is NaN, infinite, 0 or negative (passed, or crashed with a traceback and
exit 1, which means "regression"); a change of exactly the threshold (failed by float rounding); a
non-finite threshold or timeout (accepted); config errors over many lines; report cells and XML
broken by a value's ``|``, line break or control character.

Each runs the installed CLI as a subprocess, as a pipeline does. The real farm never answers NaN,
infinite or 0 ms times, nor chosen times such as exactly 2.0 and 2.1 ms, nor config keys holding
control characters: those answers come from :class:`FakeFarm`, the farm's job routes as the gate uses
them, on a stand-in server (tests/stand_in_server.py). The rest needs no farm: it runs against an API
address nobody listens on (tests/cli/test_bad_arguments.py), so anything sent would fail differently
("cannot reach")."""

from __future__ import annotations

import json
import math
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from kernelfarm.core.exports import json_format
from kernelfarm.core.exports.model import BestEntry, BestExport
from tests.cli.test_bad_arguments import kernelfarm
from tests.stand_in_server import StandInRequest, stand_in_server

KERNEL = "matmul_fp32"
GPU = "nvidia-h100-80gb-hbm3"
PROBLEM = {"M": 4096}
PINNED_CONFIG = "BM=64"
TUNED_CONFIG = "BM=128"
PROGRESS = {"total": 1, "queued": 0, "running": 0, "complete": 1, "failed": 0, "cancelled": 0}


class FakeFarm:
    """The farm's job routes as the gate uses them: ``POST /v1/jobs`` creates a job that is complete
    at once, ``GET /v1/jobs/{id}`` answers it, ``GET /v1/jobs/{id}/trials`` its one trial. Each job's
    best is ``times[role]`` ms for ``config_keys[role]``, the role being the last part of the gate's
    idempotency key (baseline, candidate, recheck-pinned, recheck-tune). Times are written as JSON's
    NaN and Infinity where they are not finite, as Python's json module writes them."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self.config_keys = {"baseline": PINNED_CONFIG, "recheck-pinned": PINNED_CONFIG}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.url = ""  # the stand-in server's, while it serves (served)

    def __call__(self, request: StandInRequest) -> tuple[int, Any]:
        if request.method == "POST":
            role = request.headers["Idempotency-Key"].rsplit(":", 1)[1]
            job = self.job(f"job-{role}", request.json(), role)
            self.jobs[job["id"]] = job
            return 201, job
        parts = request.path.strip("/").split("/")  # v1, jobs, id[, trials]
        asked = self.jobs.get(parts[2]) if parts[:2] == ["v1", "jobs"] and len(parts) > 2 else None
        if asked is None:
            return 404, {"detail": "not found"}
        if parts[3:] == ["trials"]:
            return 200, {"items": [self.trial(asked)], "total": 1}
        return 200, asked

    def job(self, job_id: str, body: dict[str, Any], role: str) -> dict[str, Any]:
        best = {"trial_id": 1, "config": {"BM": 64}, "config_key": self.config_keys.get(role, TUNED_CONFIG),
                "time_ms": self.times[role]}  # fmt: skip
        return {"id": job_id, "kernel": body["kernel"], "problem": body["problem"], "gpu_model": body["gpu_model"],
                "strategy": "random", "budget_trials": body.get("budget_trials"), "budget_seconds": None,
                "state": "complete", "status_message": "done", "owner": "ci", "created_at": "2025-01-01T00:00:00Z",
                "finished_at": "2025-01-01T00:00:01Z", "best": best, "progress": PROGRESS}  # fmt: skip

    def trial(self, job: dict[str, Any]) -> dict[str, Any]:
        best = job["best"]
        return {"id": 1, "seq": 0, "config": best["config"], "config_key": best["config_key"], "state": "complete",
                "time_ms": best["time_ms"], "time_p20_ms": None, "time_p80_ms": None, "verified": True,
                "failure_kind": None, "provenance": {}}  # fmt: skip


def served(farm: FakeFarm) -> Iterator[FakeFarm]:
    """``farm`` answering on a stand-in server (``farm.url``) until the generator is closed."""
    with stand_in_server(farm) as url:
        farm.url = url
        yield farm


@pytest.fixture
def fake_farm() -> Iterator[FakeFarm]:
    yield from served(FakeFarm())


def write_baseline(folder: Path, problem: dict[str, Any] = PROBLEM, config_key: str = PINNED_CONFIG) -> None:
    """The pinned baseline export: one entry, for ``problem`` on the H100."""
    entry = BestEntry(gpu_model=GPU, problem=problem, problem_key=",".join(f"{k}={v}" for k, v in problem.items()),
                      config={"BM": 64}, config_key=config_key, time_ms=2.0, trial_id=1, job_id="main-job")  # fmt: skip
    export = BestExport(kernel=KERNEL, kernel_version=1, source_hash="0" * 16, parameters=["BM"],
                        problem_params=list(problem), generated_at=datetime.now(UTC), entries=[entry])  # fmt: skip
    (folder / "baseline.json").write_text(json_format.write(export))


def write_config(folder: Path, problem: dict[str, Any] = PROBLEM, **settings: Any) -> Path:
    config = {"baseline": "baseline.json", "threshold": 0.05, "timeout": 60, **settings,
              "entry": [{"kernel": KERNEL, "gpu": GPU, "problem": problem, "budget_trials": 4}]}  # fmt: skip
    path = folder / "gate.json"
    path.write_text(json.dumps(config))
    return path


def ci(
    tmp_path: Path, command: str, config: Path, farm: FakeFarm | None, *args: str
) -> subprocess.CompletedProcess[str]:
    """``kernelfarm ci COMMAND CONFIG`` writing both reports into ``tmp_path``, against ``farm`` (none:
    an address nobody listens on)."""
    env = {"KERNELFARM_API_URL": farm.url} if farm is not None else None
    done = kernelfarm(tmp_path, "ci", command, str(config), "--run-id", "probe", "--summary",
                      str(tmp_path / "summary.md"), "--junit", str(tmp_path / "junit.xml"), "--poll", "0.01", *args,
                      env=env)  # fmt: skip
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return done


def junit_cases(path: Path) -> list[ET.Element]:
    """The report's test cases; ET.parse fails on XML that is not well-formed."""
    return ET.parse(path).getroot().findall("testsuite/testcase")


def table_rows(summary: Path) -> list[list[str]]:
    """The summary's table as a GFM renderer reads it (markdown-it-py: rich's own markdown parser):
    each row's cells as rendered text; code spans as their content."""
    tokens = MarkdownIt("commonmark").enable("table").parse(summary.read_text())
    rows: list[list[str]] = []
    for token in tokens:
        if token.type == "tr_open":
            rows.append([])
        elif token.type == "inline" and rows and token.children is not None:
            rows[-1].append("".join(child.content for child in token.children))
    return rows


# ---------------------------------------------------------------------------------------------- times
@pytest.mark.parametrize(
    ("baseline_ms", "candidate_ms", "says"),
    [
        (2.0, math.nan, f"the candidate job job-candidate measured nan ms for {TUNED_CONFIG}: not a finite number"),
        (2.0, -math.inf, f"the candidate job job-candidate measured -inf ms for {TUNED_CONFIG}: not a finite number"),
        (math.inf, 1e9, f"the baseline job job-baseline measured inf ms for {PINNED_CONFIG}: not a finite number"),
        (0.0, 2.0, f"the baseline job job-baseline measured 0.0 ms for {PINNED_CONFIG}: not more than 0"),  # it divided
        (2.0, -1.0, f"the candidate job job-candidate measured -1.0 ms for {TUNED_CONFIG}: not more than 0"),
        (math.nan, 0.0, f"the baseline job job-baseline measured nan ms for {PINNED_CONFIG}: not a finite number; "
                        f"the candidate job job-candidate measured 0.0 ms for {TUNED_CONFIG}: not more than 0"),
    ],
)  # fmt: skip
def test_gate_a_time_that_is_not_finite_and_positive_is_an_error_in_both_reports(
    tmp_path: Path, fake_farm: FakeFarm, baseline_ms: float, candidate_ms: float, says: str
) -> None:
    """NaN and -inf passed (a comparison with NaN is false), an infinite baseline passed at -100 %,
    and a 0 ms baseline crashed on an assert (exit 1, which means "regression", and no reports)."""
    fake_farm.times.update(baseline=baseline_ms, candidate=candidate_ms)
    write_baseline(tmp_path)
    done = ci(tmp_path, "gate", write_config(tmp_path), fake_farm)
    assert done.returncode == 2, done.stdout + done.stderr
    [case] = junit_cases(tmp_path / "junit.xml")
    error = case.find("error")
    assert error is not None and error.get("message") == says
    [_, row] = table_rows(tmp_path / "summary.md")
    assert row[1] == "💥 error" and row[7] == "" and row[8] == says  # no change shown for times not compared


@pytest.mark.parametrize(
    ("candidate_ms", "exit_code"),
    [(2.1, 0), (2.0999999, 0), (2.1000001, 1)],  # 2.1 / 2.0 - 1 is 0.050000000000000044 in floats
)
def test_gate_a_change_of_exactly_the_threshold_passes(
    tmp_path: Path, fake_farm: FakeFarm, candidate_ms: float, exit_code: int
) -> None:
    """docs/CI.md: the entry fails when the candidate is more than the threshold slower."""
    fake_farm.times.update(baseline=2.0, candidate=candidate_ms)
    write_baseline(tmp_path)
    done = ci(tmp_path, "gate", write_config(tmp_path), fake_farm)
    assert done.returncode == exit_code, done.stdout + done.stderr
    [_, row] = table_rows(tmp_path / "summary.md")
    assert row[7] == "+5.0%" and row[1] == ("✅ pass" if exit_code == 0 else "❌ regression")


@pytest.mark.parametrize(
    ("pinned_now_ms", "tuned_ms", "exit_code", "says"),
    [
        (0.0, 1.0, 2, f"the re-measure job job-recheck-pinned measured 0.0 ms for {PINNED_CONFIG}: not more than 0"),
        (math.nan, 1.0, 2,
         f"the re-measure job job-recheck-pinned measured nan ms for {PINNED_CONFIG}: not a finite number"),
        (2.0, math.nan, 2, f"the re-tune job job-recheck-tune measured nan ms for {TUNED_CONFIG}: not a finite number"),
        (2.0, 1.9, 0, "re-tuned: the pinned config is still the best (within the threshold)"),  # exactly -5 %
        (2.0, 1.8999999, 1, f"config {TUNED_CONFIG} is now 5.0% faster than the pinned {PINNED_CONFIG}: "
                            "update the pinned export"),
    ],
)  # fmt: skip
def test_recheck_times_and_the_threshold_boundary(
    tmp_path: Path, fake_farm: FakeFarm, pinned_now_ms: float, tuned_ms: float, exit_code: int, says: str
) -> None:
    """The re-measured pinned config against a re-tune (--force: the toolchain did not change); a 0 ms
    re-measurement crashed on an assert, a NaN passed, and a config exactly 5 % faster was flagged."""
    fake_farm.times.update({"recheck-pinned": pinned_now_ms, "recheck-tune": tuned_ms})
    write_baseline(tmp_path)
    done = ci(tmp_path, "recheck", write_config(tmp_path), fake_farm, "--force")
    assert done.returncode == exit_code, done.stdout + done.stderr
    [_, row] = table_rows(tmp_path / "summary.md")
    assert row[8] == says
    ET.parse(tmp_path / "junit.xml")


# ---------------------------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ("threshold = inf", "threshold: input should be a finite number, got inf"),  # passed a 50 % regression
        ("threshold = nan", "threshold: input should be a finite number, got nan"),
        ("timeout = inf", "timeout: input should be a finite number, got inf"),
        ("timeout = 1e400", "timeout: input should be a finite number, got inf"),
        ("threshold = -0.1", "threshold: input should be greater than or equal to 0, got -0.1"),
        ("timeout = 'soon'\nthreshold = inf\nretries = 3",
         "threshold: input should be a finite number, got inf; timeout: input should be a valid number, unable to "
         "parse string as a number, got 'soon'; retries: extra inputs are not permitted"),
        ("[[entry]]\nkernel = 'k'\ngpu = 'g'\nbudget_trials = 1\nthreshold = inf",
         "entry[0].threshold: input should be a finite number, got inf"),
        ("[[entry]]\nkernel = 'k'\ngpu = 'g'\nbudget_seconds = inf",
         "entry[0].budget_seconds: input should be a finite number, got inf"),
        ("[[entry]]\nkernel = 'k'\ngpu = 'g'\nbudget_trials = 1\nproblem = { M = 1.5 }",
         "entry[0].problem: dimension 'M' is 1.5: a dimension is an integer or text"),
        ("[[entry]]\nkernel = 'k'\ngpu = 'g'\nbudget_trials = 1\nproblem = { M = true }",
         "entry[0].problem: dimension 'M' is True: a dimension is an integer or text"),
        ("[[entry]]\nkernel = \"two\\nlines\"\ngpu = 'g'",
         "entry[0]: entry 'two\\nlines' on 'g': mode 'tune' needs budget_trials or budget_seconds"),
        ("[[entry]]\nkernel = 'k'\ngpu = 'g'\nbudget_trials = \"1\\u0001\"",
         "entry[0].budget_trials: input should be a valid integer, unable to parse string as an integer, "
         "got '1\\x01'"),
        # pydantic took true for 1 and false for 0: a threshold of 100 % passed a candidate twice as slow
        ("threshold = true\ntimeout = false", "threshold: a boolean (true) is not a number; "
         "timeout: a boolean (false) is not a number"),
        ("[[entry]]\nkernel = 'k'\ngpu = 'g'\nbudget_trials = true\nseed = false\nthreshold = true",
         "entry[0].budget_trials: a boolean (true) is not a number; entry[0].seed: a boolean (false) is not a "
         "number; entry[0].threshold: a boolean (true) is not a number"),
        # An entry the baseline has (so that it is checked): a traceback and exit 1, which means "regression",
        # from model_slug for a GPU name without a letter or digit, and from serializing a space this deep.
        (f"[[entry]]\nkernel = '{KERNEL}'\ngpu = '---'\nproblem = {{ M = 4096 }}\nbudget_trials = 1",
         "entry[0].gpu: cannot derive a GPU model from device name '---'"),
        (f"[[entry]]\nkernel = '{KERNEL}'\ngpu = '{GPU}'\nproblem = {{ M = 4096 }}\nbudget_trials = 1\n"
         f"space = {{ parameters = {{ BM = {'[' * 300}{']' * 300} }} }}",
         "entry[0].space: nested deeper than 8 levels (a space is parameters and constraints)"),
    ],
)  # fmt: skip
def test_a_bad_config_value_is_one_line_naming_the_field(tmp_path: Path, settings: str, says: str) -> None:
    write_baseline(tmp_path)
    entry = "" if "[[entry]]" in settings else "\n[[entry]]\nkernel = 'k'\ngpu = 'g'\nbudget_trials = 1\n"
    config = tmp_path / "gate.toml"
    config.write_text(f"baseline = 'baseline.json'\n{settings}\n{entry}")
    done = ci(tmp_path, "gate", config, None)
    assert done.returncode == 2 and done.stderr == f"error: {config}: {says}\n", done.stderr
    assert not (tmp_path / "summary.md").exists()  # refused before anything was measured


def test_a_bad_export_or_export_name_is_one_line(tmp_path: Path) -> None:
    write_baseline(tmp_path)
    export = tmp_path / "baseline.json"
    export.write_text(export.read_text().replace('"time_ms": 2.0', '"time_ms": "fast"'))
    done = ci(tmp_path, "gate", write_config(tmp_path), None)
    assert done.returncode == 2
    assert done.stderr == (f"error: {export}: not a kernelfarm.best-export file: entries[0].time_ms: input should "
                           "be a valid number, unable to parse string as a number, got 'fast'\n")  # fmt: skip
    for name, reason in (("base\x00line.json", "embedded null byte"), ("base\nline.json", "No such file or directory")):
        done = ci(tmp_path, "gate", write_config(tmp_path, baseline=name), None)  # the NUL was a traceback
        shown = name.encode("unicode_escape").decode()
        assert done.returncode == 2 and done.stderr == f"error: cannot read the export {tmp_path}/{shown}: {reason}\n"


# ---------------------------------------------------------------------------------------------- reports
def test_report_cells_and_xml_hold_any_value(tmp_path: Path, fake_farm: FakeFarm) -> None:
    """A problem value and config keys holding ``|``, backticks, backslashes, line breaks and control
    characters: the table keeps its 9 cells and shows each value escaped, the XML stays well-formed."""
    problem = {"M": "a|b\nc\x01d", "N": "x\\|y"}
    pinned_key, tuned_key = "BM=64|`x`\x00", "`BM=128\u2028\x1b[31m"
    fake_farm.config_keys.update(baseline=pinned_key, candidate=tuned_key)
    fake_farm.times.update(baseline=2.0, candidate=3.0)
    write_baseline(tmp_path, problem, pinned_key)
    done = ci(tmp_path, "gate", write_config(tmp_path, problem), fake_farm)
    assert done.returncode == 1, done.stdout + done.stderr
    name = f"{KERNEL} [M=a|b\\nc\\x01d,N=x\\|y] on {GPU}"
    [header, row] = table_rows(tmp_path / "summary.md")
    assert len(header) == len(row) == 9
    assert row[:3] == [name, "❌ regression", "BM=64|`x`\\x00"] and row[5] == "`BM=128\\u2028\\x1b[31m"
    [case] = junit_cases(tmp_path / "junit.xml")
    assert case.get("name") == name and case.find("failure") is not None
    details = (case.findtext("system-out") or "").splitlines()
    assert details[0] == "baseline_config=BM=64|`x`\\x00" and details[2] == "candidate_config=`BM=128\\u2028\\x1b[31m"


def test_reports_of_an_entry_never_measured_hold_any_value(tmp_path: Path) -> None:
    """No farm: the baseline has no config for the problem, so the entry is an error before anything
    is sent; its name (from a JSON config: a lone surrogate too) must still reach both reports."""
    write_baseline(tmp_path)
    problem = {"M": "4096\r\n| x |\ud800"}
    done = ci(tmp_path, "gate", write_config(tmp_path, problem), None)
    assert done.returncode == 2, done.stdout + done.stderr
    name = f"{KERNEL} [M=4096\\r\\n| x |\\ud800] on {GPU}"
    [_, row] = table_rows(tmp_path / "summary.md")
    assert len(row) == 9 and row[0] == name and row[8].startswith(f"the baseline export has no config for {GPU}")
    [case] = junit_cases(tmp_path / "junit.xml")
    assert case.get("name") == name and case.find("error") is not None
