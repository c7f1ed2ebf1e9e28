"""What an outside probe found the CLI doing with requests it cannot send and answers it cannot read, now
one human line and exit code 1 each: an argument too long for a URL, an API URL whose port is no number,
a token no header can carry (httpx raised InvalidURL and UnicodeEncodeError: tracebacks), an answer of
the right outer shape without the fields this CLI reads (KeyError, AttributeError, pydantic's many-line
dump), an error detail of any JSON (TypeError, "error: None") or holding an escape sequence (it reached
the terminal).

Each runs the real CLI in a subprocess, against an address nobody listens on (a request that was sent
would say "cannot reach the API") or a stand-in server (tests/stand_in_server.py) answering what the
farm never does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kernelfarm.client import human_detail
from tests.cli.test_bad_arguments import kernelfarm
from tests.sdk.hostile_server import job_document
from tests.stand_in_server import StandInRequest, stand_in_server

TOO_LONG = "k" * 70_000  # httpx builds no URL component over 64 KiB
TUNE = ["tune", "convolution_kernel", "--gpu", "nvidia-geforce-rtx-3090", "--budget", "5"]


class Recorder:
    """A stand-in farm: ``answer`` for every request, each request's "METHOD path" recorded."""

    def __init__(self, answer: Any, status: int = 200) -> None:
        self.answer, self.status = answer, status
        self.requests: list[str] = []

    def __call__(self, request: StandInRequest) -> tuple[int, Any]:
        self.requests.append(f"{request.method} {request.path}")
        return self.status, self.answer(request) if callable(self.answer) else self.answer


@pytest.mark.parametrize(
    ("args", "component"),
    [
        (["jobs", "--kernel", TOO_LONG], "URL component 'query' too long"),
        (["best", "convolution_kernel", "--gpu", TOO_LONG], "URL component 'query' too long"),
        (["export", TOO_LONG], "URL component 'query' too long"),
        (["kernel", "show", TOO_LONG], "URL too long"),
    ],
    ids=["jobs --kernel", "best --gpu", "export", "kernel show"],
)
def test_an_argument_too_long_for_a_url_is_one_line_and_nothing_is_sent(
    tmp_path: Path, args: list[str], component: str
) -> None:
    done = kernelfarm(tmp_path, *args)
    assert done.returncode == 1 and done.stdout == "", done.stderr[-2000:]
    assert done.stderr == f"error: cannot send this request: an argument is too long for a URL: {component}\n"


def test_an_api_url_whose_port_is_no_number_is_one_line(tmp_path: Path) -> None:
    done = kernelfarm(tmp_path, "jobs", env={"KERNELFARM_API_URL": "http://127.0.0.1:8765a"})
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr == "error: the API URL 'http://127.0.0.1:8765a' is not a valid URL: Invalid port: '8765a'\n"


@pytest.mark.parametrize("token", ["kf_abc\u2019", "kf_abc\n"], ids=["typographic-quote", "line-break"])
def test_a_token_no_header_can_carry_is_malformed_and_nothing_is_sent(tmp_path: Path, token: str) -> None:
    """A listening server: the token with a line break was sent, and said "cannot reach the API ...
    Illegal header value"; the one with a typographic quote was a UnicodeEncodeError traceback."""
    farm = Recorder({"items": [], "total": 0})
    with stand_in_server(farm) as url:
        done = kernelfarm(tmp_path, "jobs", env={"KERNELFARM_API_URL": url, "KERNELFARM_API_TOKEN": token})
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr == (
        "error: the API token is malformed: token must be printable ASCII text (from `kernelfarm token create`)\n"
    )
    assert farm.requests == []


def page(*items: Any) -> dict[str, Any]:
    return {"items": list(items), "total": len(items), "limit": 20, "offset": 0}


WORKER = {"name": "w", "backend": "replay", "gpu_model": "g", "gpu_name": "G", "compute_capability": None,
          "driver_version": None, "last_heartbeat": "2025-01-01T00:00:00Z", "live": True}  # fmt: skip
OTHER_VERSION = "is it another kernelfarm version?"


@pytest.mark.parametrize(
    ("args", "answer", "says"),
    [
        (["jobs"], page(job_document(best=None)), "answered GET /v1/jobs without the field 'items[0].best'"),
        (["jobs"], page(job_document(best=None), job_document(best=None)),
         "answered GET /v1/jobs without the field 'items[0].best'"),  # named once, not for every job
        (["workers"], [{k: v for k, v in WORKER.items() if k != "backend"}],
         "answered GET /v1/workers without the field '[0].backend'"),
        ([*TUNE, "--no-follow"], job_document(kernel=None), "answered POST /v1/jobs without the field 'kernel'"),
        (["job", "8485"], page(job_document(id=8485)),
         "answered GET /v1/jobs with fields this CLI cannot read (items[0].id: input should be a valid string, "
         "got 8485)"),
        (["best", "convolution_kernel", "--gpu", "g"], {"match": "exact", "time_ms": "fast"},
         "answered GET /v1/best with fields this CLI cannot read (matched_gpu_model: field required; "),
        (["export", "convolution_kernel"], {"schema": "kernelfarm.best-export", "entries": 5},
         "answered GET /v1/best/export with an export this CLI cannot read ("),
    ],
    ids=["jobs", "jobs-each-item", "workers", "tune", "job-prefix", "best", "export"],
)  # fmt: skip
def test_an_answer_without_the_fields_this_cli_reads_is_one_line(
    tmp_path: Path, args: list[str], answer: Any, says: str
) -> None:
    """The right outer shape (a page, a list, an object), the wrong fields: KeyError 'best' (`jobs`),
    KeyError 'backend' (`workers`), KeyError 'kernel' (`tune`), AttributeError (`job 8485`: an id that is
    no string), pydantic's "7 validation errors for BestExport" over many lines (`export`)."""
    with stand_in_server(Recorder(answer)) as url:
        done = kernelfarm(tmp_path, *args, env={"KERNELFARM_API_URL": url})
    assert done.returncode == 1, done.stdout + done.stderr[-2000:]
    assert done.stderr.startswith(f"error: the API at {url} {says}"), done.stderr
    assert done.stderr.endswith(f": {OTHER_VERSION}\n") and len(done.stderr.splitlines()) == 1, done.stderr
    assert "pydantic.dev" not in done.stderr


@pytest.mark.parametrize(
    ("detail", "says"),
    [
        ([{"msg": "x", "loc": 5}], "error: 5: x"),  # TypeError: 'int' object is not iterable
        ([{"msg": {"nested": True}, "loc": None}], "error: {'nested': True}"),
        (None, "error: the server at {url} answered HTTP 404 without a reason"),  # "error: None"
        ("", "error: the server at {url} answered HTTP 404 without a reason"),
        (["a", 7, None], "error: a; 7; no reason given"),
        ("unknown kernel '\x1b]0;owned\x07\x1b[2J'", "error: unknown kernel '\\x1b]0;owned\\x07\\x1b[2J'"),
        ("two\nlines", "error: two\\nlines"),
    ],
    ids=["loc-a-number", "msg-an-object", "null", "empty", "a-list-of-anything", "escape-sequence", "line-break"],
)
def test_an_error_detail_of_any_json_is_one_printable_line(tmp_path: Path, detail: Any, says: str) -> None:
    with stand_in_server(Recorder({"detail": detail}, status=404)) as url:
        done = kernelfarm(tmp_path, "best", "convolution_kernel", "--gpu", "g", env={"KERNELFARM_API_URL": url})
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr == says.replace("{url}", url) + "\n"
    assert "\x1b" not in done.stderr


def test_human_detail_never_raises() -> None:
    deep: Any = "bottom"
    for _ in range(1000):
        deep = {"detail": [deep]}
    assert len(human_detail(deep)) < 10_000
    assert human_detail([{"msg": "m"}] * 50).endswith("; m (and 40 more)")
    assert human_detail({"msg": "too big", "loc": ["body", "problem", 3]}) == "problem.3: too big"
    assert human_detail(3.5) == "3.5" and human_detail({}) == "no reason given"
