"""Liveness and readiness (no token: load balancers and orchestrators call these)."""

from __future__ import annotations

from fastapi import APIRouter, Response, status
from sqlalchemy import text

from kernelfarm.api.deps import CeleryDep, SettingsDep
from kernelfarm.core.db import session_scope

router = APIRouter(tags=["health"])


@router.get("/health")
def health() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/ready")
def ready(settings: SettingsDep, celery: CeleryDep, response: Response) -> dict[str, str]:
    """The database and the broker answer; 503 otherwise."""
    checks: dict[str, str] = {}
    try:
        with session_scope(settings.database_url) as session:
            session.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"unavailable: {type(exc).__name__}"
    try:
        with celery.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=2)
        checks["broker"] = "ok"
    except Exception as exc:
        checks["broker"] = f"unavailable: {type(exc).__name__}"
    ok = all(v == "ok" for v in checks.values())
    response.status_code = status.HTTP_200_OK if ok else status.HTTP_503_SERVICE_UNAVAILABLE
    return {"status": "ready" if ok else "not ready", **checks}
