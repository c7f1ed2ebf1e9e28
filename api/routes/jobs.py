"""Tuning jobs: submit, inspect, list, list trials, cancel."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Header, Query, Response, status

from kernelfarm.api import jobs_service
from kernelfarm.api.deps import CeleryDep, ReadToken, SessionDep, SettingsDep, SubmitToken
from kernelfarm.api.schemas import JobCreate, JobPublic, Page, ProfilePublic, TrialPublic
from kernelfarm.api.strict_json import StrictJSONRoute
from kernelfarm.core.errors import InvalidInput, NotFound
from kernelfarm.core.states import JobState, TrialState
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store import profiles as profile_store
from kernelfarm.core.store import trials as trial_store

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], route_class=StrictJSONRoute)
# Postgres OFFSET is a bigint: 2**63 was a 500 (found by schemathesis). No real page is this deep.
MAX_OFFSET = 10_000_000


# OpenAPI links: what a client (and schemathesis' stateful phase) can do next with a new job.
_JOB_LINKS = {
    name: {"operationId": operation, "parameters": {"job_id": "$response.body#/id"}}
    for name, operation in (("GetJob", "get_job_v1_jobs__job_id__get"),
                            ("ListTrials", "list_trials_v1_jobs__job_id__trials_get"),
                            ("CancelJob", "cancel_job_v1_jobs__job_id__cancel_post"))
}  # fmt: skip


IdempotencyKey = Annotated[
    str | None, Header(alias="Idempotency-Key", min_length=1, max_length=255, pattern=r"^[\x21-\x7e]+$")
]


@router.post("", response_model=JobPublic, status_code=status.HTTP_201_CREATED,
             responses={201: {"description": "the job, queued", "links": _JOB_LINKS}})  # fmt: skip
def create_job(
    body: JobCreate,
    principal: SubmitToken,
    session: SessionDep,
    settings: SettingsDep,
    celery: CeleryDep,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> JobPublic:
    """With an ``Idempotency-Key`` header, a retry (same key, same token owner, same body) returns the
    job the first request created (200) instead of creating a second one."""
    try:
        job, created = jobs_service.create_job_once(
            session, body, principal.name, settings, idempotency_key, quota_exempt=principal.is_admin
        )
    except NotFound as exc:  # an unknown kernel is a bad field of the body, not a missing URL
        raise InvalidInput(str(exc)) from None
    public = jobs_service.to_public(session, job)
    session.commit()  # the row must exist before the coordinator hears of it
    if not created:
        response.status_code = status.HTTP_200_OK
        return public
    jobs_service.request_step(celery, str(job.id))
    return public


# Text filters reach SQL as string literals, and PostgreSQL refuses a NUL in one: without this check
# `?kernel=%00` answered 500.
FilterText = Annotated[str | None, Query(max_length=256, pattern=r"^[^\x00]*$")]


@router.get("", response_model=Page[JobPublic])
def list_jobs(
    _: ReadToken,
    session: SessionDep,
    state: JobState | None = None,
    kernel: FilterText = None,
    gpu_model: FilterText = None,
    owner: FilterText = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> Page[JobPublic]:
    rows, total = job_store.list_jobs(
        session, state=state.value if state else None, kernel=kernel, gpu_model=gpu_model, owner=owner,
        limit=limit, offset=offset,
    )  # fmt: skip
    return Page[JobPublic](
        items=[jobs_service.to_public(session, j) for j in rows], total=total, limit=limit, offset=offset
    )


@router.get("/{job_id}", response_model=JobPublic)
def get_job(job_id: uuid.UUID, _: ReadToken, session: SessionDep) -> JobPublic:
    return jobs_service.to_public(session, job_store.get_job(session, job_id))


@router.get("/{job_id}/trials", response_model=Page[TrialPublic])
def list_trials(
    job_id: uuid.UUID,
    _: ReadToken,
    session: SessionDep,
    state: TrialState | None = None,
    order: Annotated[
        str, Query(pattern="^(seq|time)$", description="seq (proposal order) or time (fastest first)")
    ] = "seq",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> Page[TrialPublic]:
    job = job_store.get_job(session, job_id)
    rows, total = trial_store.list_trials(
        session, job.id, state=state.value if state else None, order=order, limit=limit, offset=offset
    )
    profiles = profile_store.profiles_of(session, [t.id for t in rows])
    items = [
        TrialPublic.model_validate(t).model_copy(
            update={"profile": ProfilePublic.model_validate(profiles[t.id]) if t.id in profiles else None}
        )
        for t in rows
    ]
    return Page[TrialPublic](items=items, total=total, limit=limit, offset=offset)


@router.post("/{job_id}/cancel", response_model=JobPublic)
def cancel_job(job_id: uuid.UUID, principal: SubmitToken, session: SessionDep) -> JobPublic:
    """Takes the job's owner (the name of the token that submitted it) or an admin token; 403
    otherwise. Idempotent: cancelling a finished or already cancelled job returns it unchanged."""
    principal.require_owner(job_store.get_job(session, job_id).owner, f"job {job_id}")
    job = job_store.cancel_job(session, job_id)
    return jobs_service.to_public(session, job)
