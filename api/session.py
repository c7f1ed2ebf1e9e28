"""The dashboard's browser session: a login exchanges an API token for cookies.

``kf_session`` holds the token itself: HttpOnly (page scripts never see it), SameSite=Strict (no other
site's page can make the browser send it), Path=/ (the pages call the JSON API under /v1 with it).
Revoking the token therefore ends every session made from it, within ``token_cache_seconds``.

``kf_csrf`` is readable by the pages' scripts and must come back as the ``X-CSRF-Token`` header on every
request that changes something and is authenticated by the cookie (double submit). Another origin can
neither read it nor set that header without a CORS preflight, which this API never grants; so even a
browser that ignores SameSite cannot be made to submit a job. The value is derived from the token, so no
server-side session store is needed across API processes.
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


def csrf_for(token: str) -> str:
    return hashlib.sha256(b"kernelfarm-csrf:" + token.encode()).hexdigest()


def csrf_ok(token: str, header: str | None) -> bool:
    return header is not None and hmac.compare_digest(csrf_for(token), header)


def start_session(response: Response, token: str, *, secure: bool) -> None:
    response.set_cookie(SESSION_COOKIE, token, max_age=SESSION_MAX_AGE_S, path="/", secure=secure,
                        httponly=True, samesite="strict")  # fmt: skip
    response.set_cookie(CSRF_COOKIE, csrf_for(token), max_age=SESSION_MAX_AGE_S, path="/", secure=secure,
                        httponly=False, samesite="strict")  # fmt: skip


def end_session(response: Response) -> None:
    for name in (SESSION_COOKIE, CSRF_COOKIE):
        response.delete_cookie(name, path="/", samesite="strict")
