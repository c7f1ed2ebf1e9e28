"""The FastAPI application factory: ``uvicorn --factory kernelfarm.api.app:create_app``."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from fastapi import FastAPI

from kernelfarm.api.best_cache import BestCache, read_best_versions
from kernelfarm.api.errors import ERROR_RESPONSES, install_error_handlers
from kernelfarm.api.metrics import MetricsExposition, RequestMetrics
from kernelfarm.api.middleware import BodySizeLimit, HeadAsGet, InFlightLimit, SecurityHeaders
from kernelfarm.api.routes import (
    best,
    exports,
    fleet,
    health,
    jobs,
    kernel_results,
    kernels,
    metrics,
    model_profiles,
    strategies,
    tokens,
    trial_columns,
    workers,
)
from kernelfarm.api.routes.docs import install_docs
from kernelfarm.api.routes.kernels import KERNEL_UPLOAD_PATH
from kernelfarm.api.token_cache import TokenCache, read_revocation_stamp
from kernelfarm.api.ui.routes import install_ui
from kernelfarm.core.celery_app import make_celery
from kernelfarm.core.settings import Settings, get_settings
from kernelfarm.kernels.registry import all_kernels


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Per process, before the first request: load the kernel registry (the first lookup used to
    pay ~250 ms for it), then move the ~125k objects alive after start-up out of the garbage
    collector's reach. Every full collection traversed them and stalled all requests in flight:
    66-153 ms each in an API worker under load, 10-14 ms after the freeze (measured with
    gc.callbacks during benchmarks/reliability/load.py on the 2-core VM)."""
    all_kernels()
    gc.collect()
    gc.freeze()
    yield


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    settings.require_database_url()
    app = FastAPI(
        title="kernelfarm",
        version="1",
        summary="Distributed GPU kernel auto-tuning: submit tuning jobs, query best configs per GPU model.",
        lifespan=lifespan,
        docs_url=None,  # served from local assets by install_docs (FastAPI's load from a CDN)
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.celery = make_celery(settings)
    app.state.token_cache = TokenCache(
        settings.token_cache_seconds,
        partial(read_revocation_stamp, settings.database_url),
        settings.token_revocation_check_seconds,
    )
    app.state.best_cache = BestCache(settings.best_cache_seconds, partial(read_best_versions, settings.database_url))
    app.state.metrics = MetricsExposition(settings)
    install_error_handlers(app)
    # Added last = outermost: the size check runs before a request waits for a slot, and the latency
    # recorded includes the wait.
    app.add_middleware(InFlightLimit, limit=MAX_IN_FLIGHT)
    app.add_middleware(
        BodySizeLimit,
        max_bytes=settings.max_request_bytes,
        read_timeout=settings.request_body_timeout_seconds,
        path_limits={KERNEL_UPLOAD_PATH: settings.max_kernel_upload_bytes},
    )
    app.add_middleware(RequestMetrics)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(HeadAsGet)
    app.include_router(health.router)
    app.include_router(metrics.router, responses=ERROR_RESPONSES)
    for module in (
        jobs,
        trial_columns,
        kernels,
        kernel_results,
        workers,
        fleet,
        strategies,
        best,
        tokens,
        exports,
        model_profiles,
    ):
        app.include_router(module.router, responses=ERROR_RESPONSES)
    install_docs(app)
    install_ui(app)
    return app


# Requests served at once per process (see api/middleware.py for why).
MAX_IN_FLIGHT = 12
