"""Dashboard sessions: a login exchanges an API token for a session of its own (api/session.py).

The browser keeps the session's secret, never the token: a cookie reaches every port of its host
(browsers do not separate cookies by port), and the token it used to hold worked as a bearer token
from anywhere until it was revoked. A session ends at logout, after its maximum age, or when its
token is revoked, whichever comes first, and is checked here on every authentication.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from kernelfarm.core.errors import Unauthorized
from kernelfarm.core.models import ApiToken, UiSession
from kernelfarm.core.store.tokens import hash_token

SESSION_PREFIX = "kfs_"
# Ended or expired sessions are deleted this long after they ended, when their token logs in again.
KEEP_ENDED = timedelta(days=1)


def start_session(session: Session, token: ApiToken, max_age_s: float) -> str:
    """A new session of the live token ``token`` (as ``tokens.authenticate`` found it): its secret, the
    only time it exists outside the browser."""
    session.execute(
        delete(UiSession).where(
            UiSession.token_id == token.id,
            func.coalesce(UiSession.ended_at, UiSession.expires_at) < func.now() - KEEP_ENDED,
        )
    )
    secret = SESSION_PREFIX + secrets.token_urlsafe(32)
    expires = func.now() + timedelta(seconds=max_age_s)
    session.add(UiSession(secret_hash=hash_token(secret), token_id=token.id, expires_at=expires))
    session.flush()
    return secret


def authenticate_session(session: Session, secret: str) -> ApiToken:
    """The token a live session was made from.

    Raises:
        Unauthorized: unknown, ended or expired session, or its token revoked.
    """
    row = session.execute(
        select(ApiToken)
        .join(UiSession, UiSession.token_id == ApiToken.id)
        .where(
            UiSession.secret_hash == hash_token(secret),
            UiSession.ended_at.is_(None),
            UiSession.expires_at > func.now(),
            ApiToken.revoked_at.is_(None),
        )
    ).scalar_one_or_none()
    if row is None:
        raise Unauthorized("the dashboard session has ended (logged out, expired or its token revoked): log in again")
    return row


def end_session(session: Session, secret: str) -> bool:
    """End a session (logout); False if it was not live."""
    result = session.execute(
        update(UiSession)
        .where(UiSession.secret_hash == hash_token(secret), UiSession.ended_at.is_(None))
        .values(ended_at=func.now())
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def ended_stamp(session: Session) -> tuple[int, str]:
    """Changes whenever a session is ended: what API processes compare to drop cached sessions."""
    count, latest = session.execute(select(func.count(UiSession.ended_at), func.max(UiSession.ended_at))).one()
    return int(count), str(latest)
