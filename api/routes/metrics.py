"""Prometheus ``/metrics``. Who may scrape: a read-scope user token, the dedicated scrape token
(``KERNELFARM_METRICS_TOKEN``), or, with no token, a client inside ``KERNELFARM_METRICS_OPEN_NETWORKS``."""

from __future__ import annotations

import hmac
import ipaddress

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from prometheus_client import CONTENT_TYPE_LATEST

from kernelfarm.api.deps import BearerCredentials, SettingsDep, principal_for, request_credential
from kernelfarm.api.metrics import MetricsExposition
from kernelfarm.core.errors import Forbidden
from kernelfarm.core.settings import Settings
from kernelfarm.core.store.tokens import Scope

router = APIRouter(tags=["health"])


def _from_open_network(request: Request, settings: Settings) -> bool:
    if request.client is None:
        return False
    try:
        address = ipaddress.ip_address(request.client.host)
    except ValueError:
        return False
    return any(address in network for network in settings.metrics_networks())


def _scrape_token_ok(settings: Settings, presented: str | None) -> bool:
    expected = settings.metrics_token
    return bool(expected and presented and hmac.compare_digest(presented.encode(), expected.encode()))


@router.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}})
async def metrics(
    request: Request,
    settings: SettingsDep,
    credentials: BearerCredentials,
) -> Response:
    """Prometheus text format: trials by state and failure kind, queue depth, live and busy workers per
    GPU model, trial/measure/compile/profile time histograms, API request and coordinator step latency."""
    presented = credentials.credentials if credentials is not None else None
    if not _scrape_token_ok(settings, presented) and not (presented is None and _from_open_network(request, settings)):
        principal = await principal_for(request, settings, request_credential(request, credentials))
        if Scope.READ not in principal.scopes:
            raise Forbidden(f"token {principal.name!r} lacks scope 'read'")
    exposition: MetricsExposition = request.app.state.metrics
    return Response(await run_in_threadpool(exposition.render), media_type=CONTENT_TYPE_LATEST)
