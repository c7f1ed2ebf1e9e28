"""Request bodies parsed as strict JSON: what PostgreSQL or a JSON reply cannot hold is refused here.

Python's ``json`` accepts ``NaN``, ``Infinity``, ``-Infinity`` and numbers that overflow to infinity
(``1e400``), and keeps lone surrogates (``"\\ud800"``) and NUL characters in strings. None of them is
JSON a client may rely on (RFC 8259 has no non-finite numbers; a lone surrogate is not a Unicode
character), PostgreSQL's JSONB refuses NUL and non-finite numbers, and a JSON reply that echoes them
cannot be encoded: each was a 500. The routes that take a body parse it with :class:`StrictJSONRequest`,
so FastAPI answers 422 ``json_invalid`` naming the reason instead.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from kernelfarm.core.store.text import unstorable


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} is not allowed")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:32]} is out of range")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all different: with Python's default the last of two kept silently."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key[:64]!r} is given twice in one object")
        out[key] = value
    return out


def loads_strict(raw: bytes | str) -> Any:
    """``json.loads`` that raises ``json.JSONDecodeError`` (with the reason) for non-finite numbers,
    NUL characters and lone surrogates."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        raise json.JSONDecodeError("the body is not UTF-8", "", 0) from None
    try:
        value = json.loads(
            text, parse_constant=_refuse_constant, parse_float=_finite_float, object_pairs_hook=_unique_keys
        )
    except json.JSONDecodeError:
        raise  # malformed JSON: FastAPI's own 422 json_invalid
    except RecursionError:  # FastAPI answered any other exception with a 400 that said nothing
        raise json.JSONDecodeError("the body is nested deeper than it can be read", "", 0) from None
    except ValueError as exc:  # our refusals, and integers longer than Python converts
        message = str(exc)
        if "integer string conversion" in message:  # Python's advice to call sys.set_int_max_str_digits
            message = f"an integer of more than {sys.get_int_max_str_digits()} digits"
        raise json.JSONDecodeError(message, text, 0) from None
    reason = unstorable(value, "body", None)  # the parser bounds the depth and refuses NaN already
    if reason:
        raise json.JSONDecodeError(reason, text, 0)
    return value


class StrictJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = loads_strict(await self.body())
        return self._json


class StrictJSONRoute(APIRoute):
    """The route class of every router whose operations take a JSON body."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict_handler(request: Request) -> Response:
            if _has_body(request) and not _is_json(request.headers.get("content-type", "")):
                # FastAPI would not parse it and answer "Input should be a valid dictionary".
                return JSONResponse(
                    status_code=415,
                    content={"detail": "send the body as JSON, with the header Content-Type: application/json"},
                )
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict_handler


def _has_body(request: Request) -> bool:
    length = request.headers.get("content-length")
    return (length is not None and length.strip() not in ("", "0")) or "transfer-encoding" in request.headers


def _is_json(content_type: str) -> bool:
    """``application/json`` or a ``+json`` type, with any parameters. A body without a Content-Type is
    not: FastAPI 0.165 (its ``strict_content_type``) no longer reads one as JSON, and handed its bytes to
    validation ("Input should be a valid dictionary", or a 500 where they were not UTF-8)."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))
