"""Liveness and readiness (no token: load balancers and orchestrators call these)."""

from __future__ import annotations

import json
from pathlib import Path

from celery import Celery
from fastapi import APIRouter, Response, status
from sqlalchemy import text

from kernelfarm.api.deadline import in_thread
from kernelfarm.api.deps import CeleryDep, SettingsDep
from kernelfarm.api.schemas import ReadinessPublic
from kernelfarm.core.db import session_scope
from kernelfarm.core.errors import Unavailable

router = APIRouter(tags=["health"])


@router.get("/health")
def health() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


def _check_database(database_url: str | None) -> None:
    with session_scope(database_url) as session:
        session.execute(text("SELECT 1"))


def _check_broker(celery: Celery) -> None:
    with celery.connection_for_write() as connection:
        connection.ensure_connection(max_retries=1, timeout=2)


@router.get(
    "/ready", response_model=ReadinessPublic, responses={503: {"model": ReadinessPublic, "description": "not ready"}}
)
async def ready(settings: SettingsDep, celery: CeleryDep, response: Response) -> dict[str, str]:
    """The database and the broker answer (each within ``api_database_deadline_seconds``); 503
    otherwise, naming what failed."""
    checks: dict[str, str] = {}
    deadline = settings.api_database_deadline_seconds
    for name, check, argument in (
        ("database", _check_database, settings.database_url),
        ("broker", _check_broker, celery),
    ):
        try:
            await in_thread(deadline, check, argument)
            checks[name] = "ok"
        except Unavailable:
            checks[name] = f"unavailable: no answer within {deadline:g} s"
        except Exception as exc:
            checks[name] = f"unavailable: {type(exc).__name__}"
    failing = _failing_components(settings.stack_health_file)
    if failing:
        checks["components"] = failing
    ok = all(v == "ok" for v in checks.values())
    response.status_code = status.HTTP_200_OK if ok else status.HTTP_503_SERVICE_UNAVAILABLE
    return {"status": "ready" if ok else "not ready", **checks}


def _failing_components(health_file: Path | None) -> str | None:
    """The embedded stack's components its supervisor found crash-looping or gave up on (None: all
    well, or not an embedded stack). The file is written by kernelfarm/stack.py's Supervisor; one that
    cannot be read, or is not of the shape it writes (another version's, edited by hand), is ignored
    as a missing one is: it made /ready itself fail with a 500."""
    if health_file is None:
        return None
    try:
        components = json.loads(health_file.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(components, dict):
        return None
    failing = [f"{name} {item['state']} ({item.get('exits', '?')} exits)" for name, item in components.items()
               if isinstance(item, dict) and item.get("state") in ("crash-looping", "gave up")]  # fmt: skip
    return "failing: " + "; ".join(failing) if failing else None
