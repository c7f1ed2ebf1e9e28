"""The one place where kernelfarm errors become HTTP responses."""

from __future__ import annotations

from fastapi import FastAPI, Request, status
from fastapi.responses import JSONResponse

from kernelfarm.core.errors import Conflict, Forbidden, InvalidInput, KernelfarmError, NotFound, Unauthorized

_STATUS: dict[type[KernelfarmError], int] = {
    InvalidInput: status.HTTP_422_UNPROCESSABLE_CONTENT,
    NotFound: status.HTTP_404_NOT_FOUND,
    Conflict: status.HTTP_409_CONFLICT,
    Unauthorized: status.HTTP_401_UNAUTHORIZED,
    Forbidden: status.HTTP_403_FORBIDDEN,
}


def status_for(exc: KernelfarmError) -> int:
    for cls in type(exc).__mro__:
        if cls in _STATUS:
            return _STATUS[cls]
    return status.HTTP_400_BAD_REQUEST


async def _handle(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, KernelfarmError)
    code = status_for(exc)
    headers = {"WWW-Authenticate": "Bearer"} if code == status.HTTP_401_UNAUTHORIZED else None
    return JSONResponse(status_code=code, content={"detail": str(exc)}, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(KernelfarmError, _handle)
