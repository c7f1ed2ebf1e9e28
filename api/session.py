"""The dashboard's browser session: a login exchanges an API token for cookies.

``kf_session`` holds the secret of a session the login stored (core/store/ui_sessions.py), never the
token: browsers do not separate cookies by port, so any other service on the farm's host received the
cookie, and a token there worked as a bearer token from anywhere until revoked. A session's secret
authenticates only as a cookie, ends at logout in every API process, and after ``SESSION_MAX_AGE_S``
on the server's clock, not only in the browser. The cookie is HttpOnly (page scripts never see it),
SameSite=Strict (no other site's page can make the browser send it), Path=/ (the pages call the JSON
API under /v1 with it). Revoking the token ends every session made from it.

``kf_csrf`` is readable by the pages' scripts and must come back as the ``X-CSRF-Token`` header on every
request that changes something and is authenticated by the cookie (double submit), logout included.
Another origin can neither read it nor set that header without a CORS preflight, which this API never
grants; so even a browser that ignores SameSite cannot be made to submit a job. The value is derived
from the session's secret.
"""

from __future__ import annotations

import hashlib
import hmac

from starlette.responses import Response

SESSION_COOKIE = "kf_session"
CSRF_COOKIE = "kf_csrf"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# A browser session lasts at most this long (the token itself may live longer).
SESSION_MAX_AGE_S = 12 * 3600


def csrf_for(secret: str) -> str:
    return hashlib.sha256(b"kernelfarm-csrf:" + secret.encode()).hexdigest()


def csrf_ok(secret: str, header: str | None) -> bool:
    # Compared as bytes: compare_digest refuses str with non-ASCII characters (TypeError, a 500), and a
    # header Starlette decodes as Latin-1 can hold any of them.
    return header is not None and hmac.compare_digest(csrf_for(secret).encode(), header.encode("utf-8", "replace"))


def set_session_cookies(response: Response, secret: str, *, secure: bool) -> None:
    response.set_cookie(SESSION_COOKIE, secret, max_age=SESSION_MAX_AGE_S, path="/", secure=secure,
                        httponly=True, samesite="strict")  # fmt: skip
    response.set_cookie(CSRF_COOKIE, csrf_for(secret), max_age=SESSION_MAX_AGE_S, path="/", secure=secure,
                        httponly=False, samesite="strict")  # fmt: skip


def clear_session_cookies(response: Response) -> None:
    for name in (SESSION_COOKIE, CSRF_COOKIE):
        response.delete_cookie(name, path="/", samesite="strict")
