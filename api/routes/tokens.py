"""API tokens over the API (admin only): create, list, revoke. The plaintext of a token is in the
creation answer and nowhere else (the farm stores its SHA-256)."""

from __future__ import annotations

import re

from fastapi import APIRouter, Request, status

from kernelfarm.api.deps import AdminToken, SessionDep
from kernelfarm.api.schemas import TokenCreate, TokenCreated, TokenPublic
from kernelfarm.api.strict_json import StrictJSONRoute
from kernelfarm.api.token_cache import TokenCache
from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.store import tokens as token_store

_TOKEN_ID = re.compile(r"[1-9][0-9]{0,18}")
router = APIRouter(prefix="/v1/tokens", tags=["tokens"], route_class=StrictJSONRoute)


@router.post(
    "", response_model=TokenCreated, status_code=status.HTTP_201_CREATED,
    responses={201: {"description": "the token", "links": {"RevokeToken": {
        "operationId": "revoke_token_v1_tokens__token_id__delete", "parameters": {"token_id": "$response.body#/id"}}}}},
)  # fmt: skip
def create_token(body: TokenCreate, _: AdminToken, session: SessionDep) -> TokenCreated:
    """The answer holds the token itself: the only time it is shown."""
    plaintext = token_store.create_token(session, body.name, body.scopes)
    row = token_store.find_token(session, plaintext)
    return TokenCreated(**TokenPublic.model_validate(row).model_dump(), token=plaintext)


@router.get("", response_model=list[TokenPublic])
def list_tokens(_: AdminToken, session: SessionDep) -> list[TokenPublic]:
    return [TokenPublic.model_validate(row) for row in token_store.list_tokens(session)]


@router.delete("/{token_id}", response_model=TokenPublic)
def revoke_token(token_id: int, _: AdminToken, session: SessionDep, request: Request) -> TokenPublic:
    """Revoke a token: this API process refuses it from the answer on, every other one within
    ``token_revocation_check_seconds``. Idempotent: revoking a revoked token returns it unchanged."""
    # The integer conversion alone also reads "1.0", "+1", "1_0" and " 1" as ids: a revocation must
    # name its token exactly.
    if not _TOKEN_ID.fullmatch(request.path_params["token_id"]):
        raise InvalidInput(f"token_id: a token's id in decimal digits, got {request.path_params['token_id']!r}")
    revoked = TokenPublic.model_validate(token_store.revoke_token_id(session, token_id))
    session.commit()
    token_cache: TokenCache = request.app.state.token_cache
    token_cache.forget_all()
    return revoked
