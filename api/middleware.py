"""Pure ASGI middleware (Starlette's BaseHTTPMiddleware costs about a millisecond per request and
layer, which was most of a best-config lookup's server time)."""

from __future__ import annotations

import asyncio
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


async def _reply(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


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
    """413 for bodies over ``max_bytes``: by Content-Length, or, for chunked bodies (no length to
    check), by reading at most ``max_bytes + 1`` bytes before the route sees any of it."""

    def __init__(self, app: ASGIApp, max_bytes: int, path_limits: dict[str, int] | None = None) -> None:
        """
        Args:
            max_bytes: the limit of every request body.
            path_limits: other limits for some paths (exact match), e.g. kernel uploads.
        """
        self.app, self.max_bytes = app, max_bytes
        self.path_limits = dict(path_limits or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self.path_limits.get(scope.get("path", ""), self.max_bytes)
        detail = f"request body larger than {max_bytes} bytes"
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None:
            if not length.isdigit() or int(length) > max_bytes:
                await _reply(send, 413, detail)
                return
            await self.app(scope, receive, send)
            return
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if len(body) > max_bytes:
                await _reply(send, 413, detail)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
