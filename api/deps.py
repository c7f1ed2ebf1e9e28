"""All injection lives here, as Annotated aliases used by the routes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Annotated

from celery import Celery
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from kernelfarm.api.deadline import in_thread
from kernelfarm.api.session import CSRF_HEADER, SAFE_METHODS, SESSION_COOKIE, csrf_ok
from kernelfarm.api.token_cache import TokenCache
from kernelfarm.core.db import session_scope
from kernelfarm.core.errors import Forbidden, Unauthorized
from kernelfarm.core.settings import Settings
from kernelfarm.core.store.tokens import Scope, authenticate, effective_scopes
from kernelfarm.core.store.ui_sessions import authenticate_session


# Trivial dependencies are async: a sync one costs a threadpool hop per request.
async def get_settings_dep(request: Request) -> Settings:
    return request.app.state.settings


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]


def get_session(settings: SettingsDep) -> Iterator[Session]:
    with session_scope(settings.database_url) as session:
        yield session


# scope="function": the transaction commits before the response is sent. With FastAPI's default
# ("request") the commit ran after the client had its answer, so a token or kernel version it had
# just been told about (201) could be missing from its next request, and a failed commit came
# after a success had been reported.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


async def get_celery(request: Request) -> Celery:
    return request.app.state.celery


CeleryDep = Annotated[Celery, Depends(get_celery)]

_bearer = HTTPBearer(auto_error=False, description="API token from `kernelfarm token create`")


BearerCredentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


class Principal:
    """Who calls: the token's name (the owner of the jobs it submits) and its effective scopes."""

    def __init__(self, name: str, scopes: set[Scope]) -> None:
        self.name, self.scopes = name, scopes

    @property
    def is_admin(self) -> bool:
        return Scope.ADMIN in self.scopes

    def require_owner(self, owner: str, what: str) -> None:
        """Mutating something owned takes its owner or an admin.

        Raises:
            Forbidden: the caller is neither.
        """
        if owner != self.name and not self.is_admin:
            raise Forbidden(f"{what} belongs to {owner!r}: only its owner or an admin token may change it")


@dataclass(frozen=True)
class Credential:
    """What a request authenticates with: an API token (bearer), or the dashboard's session cookie,
    whose secret is a session's (core/store/ui_sessions.py) and never works as a bearer token."""

    secret: str
    is_session: bool = False

    @property
    def cache_key(self) -> str:
        # NUL cannot be in a header: no bearer token can have a session's key
        return f"session\x00{self.secret}" if self.is_session else self.secret


def _authenticate(database_url: str | None, credential: Credential) -> tuple[str, tuple[str, ...]]:
    with session_scope(database_url) as session:
        if credential.is_session:
            row = authenticate_session(session, credential.secret)
        else:
            row = authenticate(session, credential.secret)
        return row.name, tuple(row.scopes)


async def principal_for(request: Request, settings: Settings, credential: Credential) -> Principal:
    """The credential's owner and scopes (cached per process, see api/token_cache.py)."""
    cache: TokenCache = request.app.state.token_cache
    deadline = settings.api_database_deadline_seconds
    if cache.enabled and not cache.current():
        await in_thread(deadline, cache.refresh)  # a revocation or logout elsewhere drops cached ones first
    cached = cache.get(credential.cache_key)
    if cached is None:
        generation = cache.generation
        name, granted = await in_thread(deadline, _authenticate, settings.database_url, credential)
        cache.put(credential.cache_key, name, granted, generation)
    else:
        name, granted = cached.name, cached.scopes
    return Principal(name, effective_scopes(granted))


def request_credential(request: Request, credentials: HTTPAuthorizationCredentials | None) -> Credential:
    """The bearer token, else the dashboard's session cookie (api/session.py); a cookie-authenticated
    request that changes something must carry the CSRF header."""
    if credentials is not None and credentials.scheme.lower() == "bearer" and credentials.credentials:
        return Credential(credentials.credentials)
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        raise Unauthorized("missing bearer token")
    if request.method not in SAFE_METHODS and not csrf_ok(cookie, request.headers.get(CSRF_HEADER)):
        raise Forbidden("missing or wrong X-CSRF-Token header for a cookie-authenticated request")
    return Credential(cookie, is_session=True)


def _require(scope: Scope) -> Callable[..., Awaitable[Principal]]:
    # Async, so a cached token costs no threadpool hop and no database round-trip.
    async def dependency(
        request: Request,
        settings: SettingsDep,
        credentials: BearerCredentials,
    ) -> Principal:
        principal = await principal_for(request, settings, request_credential(request, credentials))
        if scope not in principal.scopes:
            raise Forbidden(f"token {principal.name!r} lacks scope {scope.value!r}")
        return principal

    return dependency


ReadToken = Annotated[Principal, Depends(_require(Scope.READ))]
SubmitToken = Annotated[Principal, Depends(_require(Scope.SUBMIT))]
AdminToken = Annotated[Principal, Depends(_require(Scope.ADMIN))]
KernelsToken = Annotated[Principal, Depends(_require(Scope.KERNELS))]
