"""Model profiles from ``kernelfarm profile-model --store``: store one, list them, read one, delete one."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Query, status

from kernelfarm.api.deps import ReadToken, SessionDep, SettingsDep, SubmitToken
from kernelfarm.api.schemas import ModelProfileCreate, ModelProfilePublic, ModelProfileSummary
from kernelfarm.api.strict_json import StrictJSONRoute
from kernelfarm.core.errors import Conflict, InvalidInput
from kernelfarm.core.gpu import model_slug
from kernelfarm.core.store import model_profiles as store
from kernelfarm.core.store.locks import hold_until_commit

# Strict JSON like the other bodies (api/strict_json.py): NaN, Infinity and 1e400 are refused at parsing.
router = APIRouter(prefix="/v1", tags=["model profiles"], route_class=StrictJSONRoute)


@router.post("/profiles", response_model=ModelProfileSummary, status_code=status.HTTP_201_CREATED)
def create_profile(
    body: ModelProfileCreate, principal: SubmitToken, session: SessionDep, settings: SettingsDep
) -> ModelProfileSummary:
    """Store a profile report; it is kept as sent (the farm does not re-derive it). An owner keeps at
    most ``max_model_profiles_per_owner`` of them (admins are exempt): each is up to 256 KiB, and
    without a limit one submit token could fill the database."""
    fields = body.model_dump()
    if not body.model.strip():  # it titles the profile's page and its row in the list
        raise InvalidInput("model: give the model's name (it is only white space)")
    try:
        fields["gpu_model"] = model_slug(body.device_name)
    except ValueError as exc:  # a name with no letter or digit names no GPU model
        raise InvalidInput(f"device_name: {exc}") from None
    if not principal.is_admin:
        # One owner's uploads count and insert one at a time (as job submissions do): concurrent
        # requests would otherwise all count before any committed.
        hold_until_commit(session, f"profile_quota:{principal.name}")
        stored = store.count_profiles(session, principal.name)
        if stored >= settings.max_model_profiles_per_owner:
            raise Conflict(
                f"{principal.name!r} already stores {stored} model profiles (the limit is "
                f"{settings.max_model_profiles_per_owner}); delete some with DELETE /v1/profiles/{{id}}"
            )
    row = store.save_profile(session, principal.name, fields)
    return ModelProfileSummary.model_validate(row)


@router.get("/profiles", response_model=list[ModelProfileSummary])
def list_profiles(
    _: ReadToken,
    session: SessionDep,
    gpu_model: str | None = Query(None, max_length=128, pattern=r"^[a-z0-9-]+$"),
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0, le=1 << 31),
) -> list[ModelProfileSummary]:
    """Newest first; ``gpu_model`` filters by the GPU model slug."""
    return [ModelProfileSummary.model_validate(r) for r in store.list_profiles(session, gpu_model, limit, offset)]


@router.get("/profiles/{profile_id}", response_model=ModelProfilePublic)
def get_profile(profile_id: uuid.UUID, _: ReadToken, session: SessionDep) -> ModelProfilePublic:
    return ModelProfilePublic.model_validate(store.get_profile(session, profile_id))


@router.delete("/profiles/{profile_id}", response_model=ModelProfileSummary)
def delete_profile(profile_id: uuid.UUID, principal: SubmitToken, session: SessionDep) -> ModelProfileSummary:
    """Takes the profile's owner (the token that stored it) or an admin token, 403 otherwise; answers
    the deleted profile's summary."""
    row = store.profile_summary(session, profile_id)
    principal.require_owner(row.owner, f"model profile {profile_id}")
    summary = ModelProfileSummary.model_validate(row)
    store.delete_profile(session, profile_id)  # 404 when a concurrent request deleted it first
    return summary
