"""A small HTTP server in a thread standing in for a hostile or broken farm: it answers each request
with whatever JSON a test gives it, for answers the real farm never sends (a triton export naming
``../x``, a job missing fields). Tests of the SDK and of the CLI use it; it is shut down when the
``with`` block ends. ``BROKEN_JOB`` is a job answer that is not a Job, and ``BROKEN_JOB_REASONS`` what
the SDK says of it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import pytest

from kernelfarm.client import ApiError
from kernelfarm.sdk import Client

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


class Answers(Protocol):
    def __call__(self, method: str, path: str) -> tuple[int, Any]:
        """The status and JSON document for ``method`` on ``path`` (without its query)."""
        ...


@contextmanager
def hostile_server(answers: Answers) -> Iterator[str]:
    """Serve ``answers`` on 127.0.0.1 and yield the server's URL; every request body is read and ignored."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.answer("GET")

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.answer("POST")

        def answer(self, method: str) -> None:
            status, document = answers(method, self.path.split("?")[0])
            data = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # the test's output, not the server's
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="hostile-farm")
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def refusal(answers: Answers, ask: Callable[[Client], object]) -> ApiError:
    """The ApiError the SDK client raises when ``ask`` calls it against a server of ``answers``."""
    with hostile_server(answers) as url, Client(url, retries=0) as client, pytest.raises(ApiError) as refused:
        ask(client)
    return refused.value
