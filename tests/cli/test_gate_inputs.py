"""`kernelfarm ci gate|recheck` (docs/CI.md) on what a pipeline's environment and config may hand it,
as a second outside probe found them mishandled: a run id no Idempotency-Key can carry (every entry an
error row after the client's retries, worded "cannot reach the farm" or "not valid Unicode", or refused
by the farm); a farm address or token the client refuses (a traceback, exit 1: "regression") or no farm
named at all (exit 1); markup in a value shown in the summary (a kernel or problem name's ``<img>`` was
an image, ``[t](url)`` a link, ``&lt;`` showed as ``<``).

Each runs the installed CLI as a subprocess, as a pipeline does, against a stand-in server that records
what was asked of it (tests/stand_in_server.py) or an address nobody listens on
(tests/cli/test_bad_arguments.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from kernelfarm.gate.measure import replacement_key
from kernelfarm.services import free_port
from tests.cli.test_bad_arguments import kernelfarm, words
from tests.cli.test_ci_command_args import NeverFinishing
from tests.cli.test_gate_hardening import GPU, KERNEL, junit_cases, table_rows, write_baseline, write_config
from tests.stand_in_server import stand_in_server


@pytest.mark.parametrize(
    ("run_id", "says"),
    [
        ("a\nb", "'a\\nb': a run id is printable ASCII without spaces"),  # httpx: "Illegal header value"
        ("größe", "'größe': a run id is printable ASCII without spaces"),  # not encodable in a header
        ("pr 42", "'pr 42': a run id is printable ASCII without spaces"),  # the farm's key has no space
        ("x" * 201, "a run id of 201 characters: at most 200"),  # the farm's key is at most 255
    ],
    ids=["line-break", "non-ascii", "space", "too-long"],
)
@pytest.mark.parametrize("command", ["gate", "recheck"])
def test_a_run_id_no_idempotency_key_can_carry_is_a_usage_error(
    tmp_path: Path, command: str, run_id: str, says: str
) -> None:
    write_baseline(tmp_path)
    farm = NeverFinishing()
    with stand_in_server(farm) as url:
        done = kernelfarm(tmp_path, "ci", command, str(write_config(tmp_path)), "--poll", "0.01",
                          "--summary", str(tmp_path / "summary.md"), env={"KERNELFARM_API_URL": url,
                                                                           "GITHUB_RUN_ID": run_id})  # fmt: skip
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"Invalid value for --run-id / GITHUB_RUN_ID: {says}" in words(done.stderr), done.stderr
    assert farm.requests == [] and not (tmp_path / "summary.md").exists()  # refused before anything was sent


def test_a_run_id_of_200_printable_characters_is_used(tmp_path: Path) -> None:
    write_baseline(tmp_path)
    farm = NeverFinishing()
    with stand_in_server(farm) as url:
        done = kernelfarm(tmp_path, "ci", "gate", str(write_config(tmp_path, timeout=0.1)), "--poll", "0.01",
                          "--run-id", "~:!" + "x" * 197, env={"KERNELFARM_API_URL": url})  # fmt: skip
    assert done.returncode == 2 and "still running" in done.stdout, done.stdout + done.stderr  # measured, timed out
    assert "POST /v1/jobs" in farm.requests


@pytest.mark.parametrize(
    ("url", "token", "says"),
    [
        ("farm.example:8765", "t", "cannot use the farm: base_url must be an http:// or https:// URL, got "
                                   "'farm.example:8765'"),
        ("http://127.0.0.1:8765a", "t", "cannot use the farm: base_url 'http://127.0.0.1:8765a' is not a valid URL: "
                                        "Invalid port: '8765a'"),  # httpx.InvalidURL: a traceback, exit 1
        (None, "t\n", "cannot use the farm: token must be printable ASCII text (from `kernelfarm token create`)"),
        ("", None, "cannot use the farm: the kernelfarm stack is not running (state dir {state}): run "
                   "`kernelfarm up`, or set KERNELFARM_API_URL"),
    ],
    ids=["url-without-scheme", "url-port-no-number", "token-with-line-break", "no-farm-named"],
)  # fmt: skip
def test_a_farm_the_client_cannot_use_is_one_line_and_exit_2(
    tmp_path: Path, url: str | None, token: str | None, says: str
) -> None:
    """Exit 2 (an entry could not be checked), never 1: a pipeline reads 1 as a regression. The URL
    without a scheme and the token with a line break were tracebacks; no URL and no stack exited 1.
    ``url`` None: an address nobody listens on; "": no KERNELFARM_API_URL at all."""
    write_baseline(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("KERNELFARM_API_URL", "KERNELFARM_API_TOKEN")}
    env["KERNELFARM_STATE_DIR"] = str(tmp_path / "state")
    if url is None:
        url = f"http://127.0.0.1:{free_port()}"
    if url:
        env["KERNELFARM_API_URL"] = url
    if token is not None:
        env["KERNELFARM_API_TOKEN"] = token
    argv = [sys.executable, "-P", "-m", "kernelfarm", "ci", "gate", str(write_config(tmp_path)), "--run-id", "farm"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == f"error: {says.format(state=tmp_path / 'state')}\n"


@pytest.mark.parametrize("database_url", ["garbage", "sqlite:///x.db", "postgresql://u:secret@db:x/farm"])
def test_the_gate_does_not_read_database_url(tmp_path: Path, database_url: str) -> None:
    """The gate needs no database: a DATABASE_URL another program left in the environment changes nothing
    (the farm's check of it, core/settings.py checked_database_url, runs where a database is needed)."""
    write_baseline(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("KERNELFARM_DATABASE_URL", "DATABASE_URL")}
    env["KERNELFARM_STATE_DIR"] = str(tmp_path / "state")
    env["KERNELFARM_API_URL"] = f"http://127.0.0.1:{free_port()}"
    argv = [sys.executable, "-P", "-m", "kernelfarm", "ci", "gate", str(write_config(tmp_path)), "--run-id", "farm"]
    answers = [subprocess.run(argv, env=env | extra, capture_output=True, text=True, timeout=120, cwd=tmp_path)
               for extra in ({}, {"DATABASE_URL": database_url})]  # fmt: skip
    without, with_it = answers
    for done in answers:  # the API is not there: the gate's report says so, whatever DATABASE_URL holds
        assert done.returncode == without.returncode and "cannot reach the farm at" in done.stdout, done
        assert "DATABASE_URL" not in done.stdout + done.stderr and "secret" not in done.stdout + done.stderr
    assert with_it.stderr == without.stderr


def test_markup_in_a_value_shows_as_text_in_the_summary(tmp_path: Path) -> None:
    """No farm: the baseline has no config for the problem, so the entry is an error row before anything
    is sent, its name holding HTML, a link, an image and an entity reference; GitHub renders the summary
    as GFM with raw HTML (sanitized, but images, links and <details> kept)."""
    write_baseline(tmp_path)
    value = "<img src=https://example.invalid/x.png> [run again](https://example.invalid) ![i](x) &lt;b&gt; &#x202e;"
    done = kernelfarm(tmp_path, "ci", "gate", str(write_config(tmp_path, {"M": value})), "--run-id", "markup",
                      "--summary", str(tmp_path / "summary.md"), "--junit", str(tmp_path / "junit.xml"))  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    html = MarkdownIt("commonmark").enable("table").render((tmp_path / "summary.md").read_text(encoding="utf-8"))
    assert "<img" not in html and "<a " not in html, html
    assert "&lt;img src=https://example.invalid/x.png&gt; [run again](https://example.invalid)" in html
    assert "&amp;lt;b&amp;gt; &amp;#x202e;" in html  # shown as written, not as "<b>" and a reversal
    name = f"{KERNEL} [M={value}] on {GPU}"
    [_, row] = table_rows(tmp_path / "summary.md")
    assert len(row) == 9 and row[0] == name
    [case] = junit_cases(tmp_path / "junit.xml")
    assert case.get("name") == name  # XML escapes it itself


def test_a_replaced_jobs_key_keeps_the_run_id_and_role_and_its_length() -> None:
    """A re-run's job in place of an ended one has a key of its own, the same for every re-run after
    that job, and no longer than the first (the farm takes at most 255 characters)."""
    key = "kernelfarm-ci:" + "r:" * 100 + ":0123456789abcdef:candidate"  # a run id with colons in it
    replaced = replacement_key(key, "5a1f0c5e-0000-4000-8000-000000000001")
    assert len(replaced) == len(key) and replaced != key
    assert replaced.startswith("kernelfarm-ci:" + "r:" * 100) and replaced.endswith(":candidate")
    assert replacement_key(key, "5a1f0c5e-0000-4000-8000-000000000001") == replaced
    assert replacement_key(key, "5a1f0c5e-0000-4000-8000-000000000002") != replaced


@pytest.mark.parametrize(
    ("summary", "junit", "says"),
    [
        ("gate.json", None, "--summary {d}/gate.json is the config: the report would overwrite it"),
        (None, "baseline.json", "--junit {d}/baseline.json is the baseline export: the report would overwrite it"),
        ("r.out", "./r.out", "--summary and --junit name the same file {d}/r.out: give each report its own"),
    ],
    ids=["summary-over-config", "junit-over-baseline", "both-one-file"],
)
def test_a_report_that_would_overwrite_an_input_or_the_other_report_is_refused(
    tmp_path: Path, summary: str | None, junit: str | None, says: str
) -> None:
    write_baseline(tmp_path)
    config = write_config(tmp_path)
    before = {name: (tmp_path / name).read_bytes() for name in ("gate.json", "baseline.json")}
    farm = NeverFinishing()
    reports = [*(["--summary", str(tmp_path / summary)] if summary else []),
               *(["--junit", str(tmp_path / junit)] if junit else [])]  # fmt: skip
    with stand_in_server(farm) as url:
        done = kernelfarm(tmp_path, "ci", "gate", str(config), *reports, env={"KERNELFARM_API_URL": url})
    assert done.returncode == 2, done.stdout + done.stderr
    assert says.format(d=tmp_path) in words(done.stderr), done.stderr
    assert farm.requests == []  # refused before anything was sent
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
