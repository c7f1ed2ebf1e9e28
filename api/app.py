"""The FastAPI application factory: ``uvicorn --factory api.app:create_app``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from api.errors import install_error_handlers
from api.routes import best, health, jobs, kernels, workers
from api.token_cache import TokenCache
from core.celery_app import make_celery
from core.settings import Settings, get_settings


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    settings.require_database_url()
    app = FastAPI(
        title="kernelfarm",
        version="1",
        summary="Distributed GPU kernel auto-tuning: submit tuning jobs, query best configs per GPU model.",
    )
    app.state.settings = settings
    app.state.celery = make_celery(settings)
    app.state.token_cache = TokenCache(settings.token_cache_seconds)
    install_error_handlers(app)
    _limit_request_size(app, settings.max_request_bytes)
    _limit_in_flight(app, MAX_IN_FLIGHT)
    for module in (health, jobs, kernels, workers, best):
        app.include_router(module.router)
    return app


# Requests served at once per process; the rest wait here, on the event loop, holding nothing.
# Must stay below the database pool (core/db.py: 5 + 10 overflow). Without it, 50 concurrent clients
# deadlocked the API: 40 threadpool threads waited for the 15 pooled connections while the requests
# holding those connections waited for a threadpool thread to run their session teardown
# (FastAPI runs sync generator dependencies' exit in the threadpool); measured, see docs/RELIABILITY.md.
MAX_IN_FLIGHT = 12


def _limit_in_flight(app: FastAPI, limit: int) -> None:
    gates: dict[int, asyncio.Semaphore] = {}  # one per event loop (test clients run their own)

    @app.middleware("http")
    async def gate(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        loop_gate = gates.setdefault(id(asyncio.get_running_loop()), asyncio.Semaphore(limit))
        async with loop_gate:
            return await call_next(request)


def _limit_request_size(app: FastAPI, max_bytes: int) -> None:
    too_large = {"detail": f"request body larger than {max_bytes} bytes"}

    @app.middleware("http")
    async def limit(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > max_bytes):
            return JSONResponse(status_code=413, content=too_large)
        if length is None and request.method in ("POST", "PUT", "PATCH"):
            # Chunked transfer has no Content-Length to check: read at most max_bytes + 1 bytes
            # here, so an endless body is cut off instead of being buffered by the JSON parser.
            body = bytearray()
            async for chunk in request.stream():
                body += chunk
                if len(body) > max_bytes:
                    return JSONResponse(status_code=413, content=too_large)
            request._body = bytes(body)  # the route reads the buffered body, not the spent stream
        return await call_next(request)
