"""The one place where errors become HTTP responses.

Every error answer has one shape, :class:`kernelfarm.api.schemas.ErrorPublic`: ``{"detail": ...}``
where detail is a sentence, or for request validation a list of issues. Whatever a handler echoes
(a field's input, an unknown kernel name) is made encodable first: a lone surrogate or a NaN in an
echoed input made the 422 handler itself fail, which was a 500 that dropped the connection.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import FastAPI, Request, status
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from kernelfarm.api.schemas import ErrorPublic
from kernelfarm.core.db import is_unavailable
from kernelfarm.core.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    KernelfarmError,
    NotFound,
    Unauthorized,
    Unavailable,
)

logger = logging.getLogger(__name__)

_STATUS: dict[type[KernelfarmError], int] = {
    InvalidInput: status.HTTP_422_UNPROCESSABLE_CONTENT,
    NotFound: status.HTTP_404_NOT_FOUND,
    Conflict: status.HTTP_409_CONFLICT,
    Unauthorized: status.HTTP_401_UNAUTHORIZED,
    Forbidden: status.HTTP_403_FORBIDDEN,
    Unavailable: status.HTTP_503_SERVICE_UNAVAILABLE,
}

# Seconds a client should wait before retrying while the database is unreachable.
DATABASE_RETRY_AFTER = 5


def status_for(exc: KernelfarmError) -> int:
    for cls in type(exc).__mro__:
        if cls in _STATUS:
            return _STATUS[cls]
    return status.HTTP_400_BAD_REQUEST


def encodable(value: Any) -> Any:
    """``value`` with every string made valid UTF-8 (lone surrogates escaped), bytes decoded the same way
    (invalid UTF-8 escaped) and every non-finite float replaced by its name, so that the JSON encoder
    cannot fail on it."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, bytes | bytearray):  # a body FastAPI did not parse, as the input of its error
        return bytes(value).decode("utf-8", "backslashreplace")
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {encodable(k): encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encodable(v) for v in value]
    return value


def error_response(code: int, detail: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=code, content={"detail": encodable(detail)}, headers=headers)


async def _handle(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, KernelfarmError)
    code = status_for(exc)
    headers = {"WWW-Authenticate": "Bearer"} if code == status.HTTP_401_UNAUTHORIZED else None
    if code == status.HTTP_503_SERVICE_UNAVAILABLE:
        headers = {"Retry-After": str(DATABASE_RETRY_AFTER)}
    return error_response(code, str(exc), headers)


async def _handle_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    issues = [{k: v for k, v in issue.items() if k in ("type", "loc", "msg", "input", "ctx")} for issue in exc.errors()]
    return error_response(status.HTTP_422_UNPROCESSABLE_CONTENT, jsonable_encoder(encodable(issues)))


async def _handle_database_down(request: Request, exc: Exception) -> JSONResponse:
    """PostgreSQL unreachable, restarting or not answering in time: 503 with a reason and a
    Retry-After, not a bare 500 (a client retries a 503; it reports a 500 as a bug)."""
    if isinstance(exc, DBAPIError) and not is_unavailable(exc):
        raise exc  # a real bug (bad SQL, constraint violation): let it be a logged 500
    logger.warning("database unavailable: %s", type(getattr(exc, "orig", exc)).__name__)
    reason = f"database unavailable ({type(getattr(exc, 'orig', exc)).__name__}); retry later"
    return error_response(status.HTTP_503_SERVICE_UNAVAILABLE, reason, {"Retry-After": str(DATABASE_RETRY_AFTER)})


# What the OpenAPI schema says every /v1 operation may answer besides its success (one schema).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorPublic, "description": description}
    for code, description in {
        400: "malformed request",
        401: "missing, unknown or revoked token",
        403: "the token lacks the scope, or does not own the job",
        404: "no such object",
        408: "request body not received in time",
        409: "the object's state forbids the operation",
        413: "request body too large",
        422: "a field or parameter is invalid (detail lists the issues) or asks for the impossible",
        503: "the database is unavailable; retry after Retry-After seconds",
    }.items()
}


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(KernelfarmError, _handle)
    app.add_exception_handler(RequestValidationError, _handle_validation)
    app.add_exception_handler(DBAPIError, _handle_database_down)
    app.add_exception_handler(PoolTimeout, _handle_database_down)
