"""The FastAPI application factory: ``uvicorn --factory api.app:create_app``."""

from __future__ import annotations

from functools import partial

from fastapi import FastAPI

from api.best_cache import BestCache, read_best_versions
from api.errors import install_error_handlers
from api.middleware import BodySizeLimit, InFlightLimit
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
    app.state.best_cache = BestCache(settings.best_cache_seconds, partial(read_best_versions, settings.database_url))
    install_error_handlers(app)
    # Added last = outermost: the size check runs before a request waits for a slot.
    app.add_middleware(InFlightLimit, limit=MAX_IN_FLIGHT)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_request_bytes)
    for module in (health, jobs, kernels, workers, best):
        app.include_router(module.router)
    return app


# Requests served at once per process (see api/middleware.py for why).
MAX_IN_FLIGHT = 12
