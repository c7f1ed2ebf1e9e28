"""A job's trials as columns: one request for everything the job page plots, however many trials; and its
best-so-far curve, a small answer the job page draws its first view from."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Response

from kernelfarm.api.deps import ReadToken, SessionDep
from kernelfarm.api.insight_schemas import ConvergencePublic, TrialColumnsPublic
from kernelfarm.core.errors import NotFound
from kernelfarm.core.store.jobs import get_job, kernel_version
from kernelfarm.core.store.trial_table import convergence, trial_columns_json
from kernelfarm.kernels.registry import get_kernel

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.get("/{job_id}/trial-columns", response_model=TrialColumnsPublic)
def job_trial_columns(
    job_id: uuid.UUID,
    _: ReadToken,
    session: SessionDep,
    limit: Annotated[
        int | None,
        Query(ge=1, le=100_000, description="only the first `limit` trials in proposal order; `count` stays the job's"),
    ] = None,
) -> Response:
    """Every trial of the job in proposal order, one list per field: state, failure kind, times,
    seconds since the job was created, each parameter's value, roofline metrics and Nsight Compute
    metrics where present. Lighter than paging /trials (no repetitions, provenance or messages)."""
    job = get_job(session, job_id)
    # The database assembles the document (core/store/trial_table.py); it is sent as it comes.
    order = _spec_order(job.kernel_name, kernel_version(session, job))  # the job's version, not the latest
    body = trial_columns_json(session, job.id, order, limit)
    return Response(content=body, media_type="application/json")


@router.get("/{job_id}/convergence", response_model=ConvergencePublic)
def job_convergence(job_id: uuid.UUID, _: ReadToken, session: SessionDep) -> ConvergencePublic:
    """The best complete time so far after each finished trial (in the order they finished), as the
    points where it improves plus the last finished trial: a step line through them is the curve."""
    return ConvergencePublic.model_validate(convergence(session, job_id))


def _spec_order(kernel: str, version: int) -> list[str] | None:
    """The kernel spec's parameter order (the stored space is JSONB, which keeps no key order)."""
    try:
        return [p.name for p in get_kernel(kernel, version).space.parameters]
    except NotFound:  # a kernel no longer in the catalogue: the stored space's names
        return None
