"""A small HTTP server in a thread, standing in for a server a test cannot have a real one of: a hostile
or broken farm (answers our farm never sends: a triton export naming ``../x``, a job missing fields), a farm
whose answers a test chooses (the CI gate's timings), another JSON API, a health endpoint. It answers each
request with the status and JSON document that the test's ``answers`` gives, and is shut down when the
``with`` block ends."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class StandInRequest:
    method: str
    path: str  # without its query
    headers: Message
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


# The status and JSON document for a request.
Answers = Callable[[StandInRequest], tuple[int, Any]]


@contextmanager
def stand_in_server(answers: Answers) -> Iterator[str]:
    """Serve ``answers`` on 127.0.0.1 and yield the server's URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.answer()

        def do_POST(self) -> None:
            self.answer()

        def do_DELETE(self) -> None:
            self.answer()

        def answer(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            request = StandInRequest(self.command, self.path.split("?")[0], self.headers, body)
            status, document = answers(request)
            data = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # the test's output, not the server's
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="stand-in-server")
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
