"""Liveness and readiness (no token: load balancers and orchestrators call these)."""

from __future__ import annotations

import json
from pathlib import Path

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
    failing = _failing_components(settings.stack_health_file)
    if failing:
        checks["components"] = failing
    ok = all(v == "ok" for v in checks.values())
    response.status_code = status.HTTP_200_OK if ok else status.HTTP_503_SERVICE_UNAVAILABLE
    return {"status": "ready" if ok else "not ready", **checks}


def _failing_components(health_file: Path | None) -> str | None:
    """The embedded stack's components its supervisor found crash-looping or gave up on (None: all
    well, or not an embedded stack). The file is written by kernelfarm/stack.py's Supervisor."""
    if health_file is None:
        return None
    try:
        components = json.loads(health_file.read_text())
    except (OSError, ValueError):
        return None
    failing = [f"{name} {item['state']} ({item['exits']} exits)" for name, item in components.items()
               if item.get("state") in ("crash-looping", "gave up")]  # fmt: skip
    return "failing: " + "; ".join(failing) if failing else None
