"""An answer that is not the result asked for (not a Job, not a page of trials) is an ApiError with ONE
line naming each field and why (docs/CLIENT.md): pydantic's own message is many lines (a header, each
field and its reason on lines of their own, a URL), and the CLI and CI logs print the error as one
line. The real farm never sends such answers, so they come from a hostile server
(tests/stand_in_server.py, tests/sdk/hostile_server.py)."""

from __future__ import annotations

from typing import Any

import pytest

from kernelfarm.sdk import Client
from tests.sdk.hostile_server import BROKEN_JOB, BROKEN_JOB_REASONS, job_document, refusal
from tests.stand_in_server import stand_in_server


def answering(document: Any, status: int = 200) -> Any:
    return lambda request: (status, document)


def test_a_job_answer_that_is_not_a_job_is_one_line_naming_the_fields() -> None:
    refused = refusal(answering(BROKEN_JOB), lambda client: client.job("job-1"))
    assert refused.status == 200
    assert refused.message == f"the farm's answer to GET /v1/jobs/job-1 is not a Job: {BROKEN_JOB_REASONS}"


def test_a_submit_answer_that_is_not_a_job_is_one_line() -> None:
    def submit(client: Client) -> object:
        return client.submit("matmul_fp32", "nvidia-h100-80gb-hbm3", {"M": 4096}, budget_trials=4)

    refused = refusal(answering(BROKEN_JOB, 201), submit)
    assert refused.message == f"the farm's answer to POST /v1/jobs is not a Job: {BROKEN_JOB_REASONS}"


@pytest.mark.parametrize(
    ("document", "reasons"),
    [
        ([], "the answer: input should be a valid dictionary or instance of Job"),
        ({"id": "job-1"}, "kernel: field required; problem: field required; gpu_model: field required; "
                          "strategy: field required; budget_trials: field required (and 8 more)"),
        (job_document(state="x" * 200), None),  # a valid job: state is any text
        (job_document(id="two\nlines\u2028"), None),
        (job_document(id=["two\nlines"]), "id: input should be a valid string"),
        (job_document(kernel="k" * 500, id=7), "id: input should be a valid string, got 7"),
        (job_document(owner="x\n" * 100, progress="p\n" * 100),
         "progress: input should be a valid dictionary or instance of Progress, got "
         "'p\\np\\np\\np\\np\\np\\np\\np\\np\\np\\np\\np\\np\\np\\np\\np\\np\\np\\np\\..."),
    ],
    ids=["a-list", "fields-missing", "valid-long-state", "valid-line-break", "a-list-id", "a-number-id", "long-value"],
)  # fmt: skip
def test_reasons_are_one_short_line(document: Any, reasons: str | None) -> None:
    if reasons is None:  # a valid job, however odd its text
        with stand_in_server(answering(document)) as url, Client(url, retries=0) as client:
            client.job("job-1")
        return
    refused = refusal(answering(document), lambda client: client.job("job-1"))
    assert refused.message == f"the farm's answer to GET /v1/jobs/job-1 is not a Job: {reasons}"


def test_a_page_of_trials_that_is_not_one_is_one_line() -> None:
    page = {"items": [{"id": 1, "seq": "first"}], "total": 1}
    refused = refusal(answering(page), lambda client: client.trials("job-1"))
    assert "\n" not in refused.message
    assert refused.message.startswith(
        "the farm's answer is not a page of trials: seq: input should be a valid integer, unable to parse string "
        "as an integer, got 'first'; "
    )
