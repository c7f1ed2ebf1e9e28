"""Answers of a hostile or broken farm, for tests of the SDK and of the CLI against a stand-in server
(tests/stand_in_server.py): ``job_document`` a job as the farm answers it, ``BROKEN_JOB`` a job answer
that is not a Job and ``BROKEN_JOB_REASONS`` what the SDK says of it; ``refusal`` the SDK's ApiError."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kernelfarm.client import ApiError
from kernelfarm.sdk import Client
from tests.stand_in_server import Answers, stand_in_server

PROGRESS = {"total": 1, "queued": 0, "running": 1, "complete": 0, "failed": 0, "cancelled": 0}


def job_document(**changes: Any) -> dict[str, Any]:
    """A running job as the farm answers it, with ``changes`` (a value None: the field left out)."""
    job = {"id": "job-1", "kernel": "matmul_fp32", "problem": {"M": 4096}, "gpu_model": "nvidia-h100-80gb-hbm3",
           "strategy": "random", "budget_trials": 4, "budget_seconds": None, "state": "running",
           "status_message": "", "owner": "ci", "created_at": "2025-01-01T00:00:00Z", "finished_at": None,
           "progress": PROGRESS, "best": None} | changes  # fmt: skip
    return {key: value for key, value in job.items() if value is not None or key not in changes}


BROKEN_JOB = job_document(progress=None, best={"trial_id": 1, "config": {}, "config_key": "", "time_ms": "fast"})
BROKEN_JOB_REASONS = (
    "progress: field required; "
    "best.time_ms: input should be a valid number, unable to parse string as a number, got 'fast'"
)


def refusal(answers: Answers, ask: Callable[[Client], object]) -> ApiError:
    """The ApiError the SDK client raises when ``ask`` calls it against a server of ``answers``."""
    with stand_in_server(answers) as url, Client(url, retries=0) as client, pytest.raises(ApiError) as refused:
        ask(client)
    return refused.value
