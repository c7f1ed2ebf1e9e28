"""Pure ASGI middleware (Starlette's BaseHTTPMiddleware costs about a millisecond per request and
layer, which was most of a best-config lookup's server time)."""

from __future__ import annotations

import asyncio
import json

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send


async def _reply(send: Send, status: int, detail: str, *, close: bool = False) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:  # the rest of the request was not read: the connection cannot carry another one
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# Answers of the API: JSON only, never cached by a browser or proxy (they carry jobs and tokens),
# never framed, never sniffed into something else.
_API_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"cache-control", b"no-store"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]
_JSON_POLICY = (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'")
# HTML pages (the interactive API docs) load their own scripts and styles; they may not be framed.
_PAGE_POLICY = (b"content-security-policy", b"frame-ancestors 'none'; object-src 'none'; base-uri 'none'")


class SecurityHeaders:
    """nosniff, no-store, no framing and a content policy on every answer (a header the route set
    itself is kept)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                content_type = dict(headers).get(b"content-type", b"")
                policy = _PAGE_POLICY if content_type.startswith(b"text/html") else _JSON_POLICY
                headers += [(n, v) for n, v in (*_API_HEADERS, policy) if n not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class HeadAsGet:
    """Answer ``HEAD`` as ``GET`` without the body (RFC 9110, 9.3.2): FastAPI adds no HEAD route, so
    ``curl -I`` and monitors that probe with HEAD got 405 from ``/health`` and every other GET route.
    The headers are the GET's, ``content-length`` included; whatever the route streams is dropped."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, send_without_body)


class InFlightLimit:
    """Requests served at once per process; the rest wait here, on the event loop, holding nothing.

    Must stay below the database pool (core/db.py: 5 + 10 overflow). Without it, 50 concurrent
    clients deadlocked the API: 40 threadpool threads waited for the 15 pooled connections while the
    requests holding those connections waited for a threadpool thread to run their session teardown
    (FastAPI runs sync generator dependencies' exit in the threadpool); see docs/RELIABILITY.md.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit
        self._gates: dict[int, asyncio.Semaphore] = {}  # one per event loop (test clients run their own)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        gate = self._gates.setdefault(id(asyncio.get_running_loop()), asyncio.Semaphore(self.limit))
        async with gate:
            await self.app(scope, receive, send)


class BodySizeLimit:
    """413 for bodies over ``max_bytes`` (by Content-Length, or, for chunked bodies, by reading at
    most ``max_bytes + 1`` bytes), and 408 for a body not received within ``read_timeout`` seconds:
    the body is read here, before the route sees any of it, so a client trickling it (or declaring
    bytes it never sends) holds no in-flight slot, thread or database connection, and not forever."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, read_timeout: float = 10.0, path_limits: dict[str, int] | None = None
    ) -> None:
        """
        Args:
            max_bytes: the limit of every request body.
            read_timeout: seconds a client has to send its whole body.
            path_limits: other limits for some paths (exact match), e.g. kernel uploads.
        """
        self.app, self.max_bytes, self.read_timeout = app, max_bytes, read_timeout
        self.path_limits = dict(path_limits or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self.path_limits.get(scope.get("path", ""), self.max_bytes)
        detail = f"request body larger than {max_bytes} bytes"
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > max_bytes):
            await _reply(send, 413, detail, close=True)
            return
        if scope["method"] not in ("POST", "PUT", "PATCH") and (length is None or length == b"0"):
            await self.app(scope, receive, send)
            return
        body = bytearray()
        try:
            with anyio.fail_after(self.read_timeout):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        break
                    body += message.get("body", b"")
                    if len(body) > max_bytes:
                        await _reply(send, 413, detail, close=True)
                        return
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await _reply(send, 408, f"request body not received within {self.read_timeout:g} s", close=True)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
