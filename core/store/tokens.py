"""API tokens: random secrets shown once, stored as SHA-256 hashes, with scopes."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from enum import StrEnum

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from kernelfarm.core.errors import Conflict, InvalidInput, NotFound, Unauthorized
from kernelfarm.core.models import ApiToken
from kernelfarm.core.store.text import invisible_character

TOKEN_PREFIX = "kf_"


class Scope(StrEnum):
    READ = "read"
    SUBMIT = "submit"
    ADMIN = "admin"
    # Upload CUDA kernel manifests (GPU code compiled by NVRTC on the workers; docs/SECURITY.md,
    # "Kernel trust"). Uploaded Python needs admin.
    KERNELS = "kernels"


# admin implies every scope; submit implies read; kernels implies read.
_IMPLIED = {Scope.ADMIN: {Scope.ADMIN, Scope.SUBMIT, Scope.READ, Scope.KERNELS},
            Scope.SUBMIT: {Scope.SUBMIT, Scope.READ}, Scope.READ: {Scope.READ},
            Scope.KERNELS: {Scope.KERNELS, Scope.READ}}  # fmt: skip


def hash_token(token: str) -> str:
    # Tokens are 256-bit random: a fast hash is enough (no dictionary to attack, unlike passwords).
    return hashlib.sha256(token.encode()).hexdigest()


def effective_scopes(scopes: Sequence[str]) -> set[Scope]:
    out: set[Scope] = set()
    for scope in scopes:
        out |= _IMPLIED[Scope(scope)]
    return out


MAX_NAME_LENGTH = 128
MAX_TOKEN_ID = 2**31 - 1  # api_tokens.id is an INTEGER


def check_token_name(name: str) -> str:
    """The name as given, if it may own jobs and kernels; else InvalidInput saying why.

    Ownership goes by name, and names are shown in job lists: a name that prints like another one
    ("alice" followed by a zero-width space) or not at all could pass for someone else.
    """
    if not name or len(name) > MAX_NAME_LENGTH:
        raise InvalidInput(f"a token name has 1 to {MAX_NAME_LENGTH} characters, got {len(name)}")
    if name != name.strip():
        raise InvalidInput("a token name may not start or end with white space")
    if (invisible := invisible_character(name)) is not None:
        raise InvalidInput(f"a token name may not contain {invisible} (an invisible or control character)")
    return name


def create_token(session: Session, name: str, scopes: Sequence[str]) -> str:
    """Create a token and return its plaintext (the only time it exists outside the caller)."""
    check_token_name(name)
    try:
        parsed = sorted({Scope(s).value for s in scopes})
    except ValueError:
        raise InvalidInput(f"scopes must be among {[s.value for s in Scope]}") from None
    if not parsed:
        raise InvalidInput("a token needs at least one scope")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(ApiToken(name=name, token_hash=hash_token(token), scopes=parsed))
    session.flush()
    return token


def find_token(session: Session, token: str) -> ApiToken:
    """The row of a token (revoked or not) by its plaintext.

    Raises:
        NotFound: no such token.
    """
    row = session.execute(select(ApiToken).where(ApiToken.token_hash == hash_token(token))).scalar_one_or_none()
    if row is None:
        raise NotFound("no such token")
    return row


def authenticate(session: Session, token: str) -> ApiToken:
    """Raises Unauthorized for unknown or revoked tokens."""
    row = session.execute(
        select(ApiToken).where(ApiToken.token_hash == hash_token(token), ApiToken.revoked_at.is_(None))
    ).scalar_one_or_none()
    if row is None:
        raise Unauthorized("invalid or revoked token")
    session.execute(update(ApiToken).where(ApiToken.id == row.id).values(last_used_at=func.now()))
    return row


def revoke_token(session: Session, name: str) -> int:
    result = session.execute(
        update(ApiToken).where(ApiToken.name == name, ApiToken.revoked_at.is_(None)).values(revoked_at=func.now())
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def revoke_token_id(session: Session, token_id: int) -> ApiToken:
    """Revoke one token by its id. Idempotent: a revoked token keeps its first revocation time.

    Raises:
        NotFound: no token has this id.
    """
    if not 1 <= token_id <= MAX_TOKEN_ID:  # PostgreSQL refuses an integer parameter beyond its range
        raise NotFound(f"token {token_id} not found")
    _keep_an_admin(session, token_id)
    session.execute(
        update(ApiToken).where(ApiToken.id == token_id, ApiToken.revoked_at.is_(None)).values(revoked_at=func.now())
    )
    row = session.get(ApiToken, token_id, populate_existing=True)
    if row is None:
        raise NotFound(f"token {token_id} not found")
    return row


def _keep_an_admin(session: Session, token_id: int) -> None:
    """Refuse revoking the last live admin token over the API: nobody could create or revoke a token
    through it afterwards (the CLI on the database host still can: the way back, and not refused).

    The live admin tokens are locked first, so two admins revoking each other's tokens at once cannot
    both pass: the second waits, then no longer counts the token the first revoked."""
    live_admins = session.execute(
        select(ApiToken.id)
        .where(ApiToken.revoked_at.is_(None), ApiToken.scopes.contains([Scope.ADMIN.value]))
        .with_for_update()
    ).scalars().all()  # fmt: skip
    if list(live_admins) == [token_id]:
        raise Conflict(
            f"token {token_id} is the farm's last admin token: create another admin token before revoking it"
        )


def revocation_stamp(session: Session) -> tuple[int, str]:
    """Changes whenever a token is revoked: what API processes compare to drop cached tokens."""
    count, latest = session.execute(select(func.count(ApiToken.revoked_at), func.max(ApiToken.revoked_at))).one()
    return int(count), str(latest)


def list_tokens(session: Session) -> Sequence[ApiToken]:
    return session.execute(select(ApiToken).order_by(ApiToken.created_at)).scalars().all()
