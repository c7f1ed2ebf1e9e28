"""A job's trials as columns: one request for everything the job page plots, however many trials."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response

from kernelfarm.api.deps import ReadToken, SessionDep
from kernelfarm.api.insight_schemas import TrialColumnsPublic
from kernelfarm.core.errors import NotFound
from kernelfarm.core.store.trial_table import trial_columns
from kernelfarm.kernels.registry import get_kernel

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.get("/{job_id}/trial-columns", response_model=TrialColumnsPublic)
def job_trial_columns(job_id: uuid.UUID, _: ReadToken, session: SessionDep) -> Response:
    """Every trial of the job in proposal order, one list per field: state, failure kind, times,
    seconds since the job was created, each parameter's value, roofline metrics and Nsight Compute
    metrics where present. Lighter than paging /trials (no repetitions, provenance or messages)."""
    columns = trial_columns(session, job_id)
    columns["parameters"] = _in_spec_order(columns["kernel"], columns["parameters"])
    # Built by the store from database rows; validated models would cost ~10x the query at 10k trials.
    body = TrialColumnsPublic.model_construct(**columns).model_dump_json()
    return Response(content=body, media_type="application/json")


def _in_spec_order(kernel: str, parameters: list[str]) -> list[str]:
    """The kernel spec's parameter order (the stored space is JSONB, which keeps no key order)."""
    try:
        order = {p.name: i for i, p in enumerate(get_kernel(kernel).space.parameters)}
    except NotFound:  # a kernel no longer in the catalogue: stored order
        return parameters
    return sorted(parameters, key=lambda name: order.get(name, len(order)))
