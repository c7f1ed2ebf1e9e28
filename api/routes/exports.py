"""Exports: a kernel's best configs (json, header, triton) and a job's trials (kernel_tuner, t4, csv)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response
from fastapi.responses import JSONResponse

from kernelfarm.api import exports_service
from kernelfarm.api.deps import ReadToken, SessionDep
from kernelfarm.api.routes.best import parse_problem
from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.exports import csv_format, header, json_format, kernel_tuner, t4, triton
from kernelfarm.core.gpu import model_slug
from kernelfarm.core.store import jobs as job_store
from kernelfarm.kernels.registry import get_kernel

router = APIRouter(prefix="/v1", tags=["exports"])

GpuFilter = Annotated[list[str], Query(max_length=64, description="GPU model slug or device name (repeatable)")]
ProblemFilter = Annotated[
    list[str], Query(max_length=32, description="name=value (repeatable): problems that have them")
]


# The answers' media types, documented so that a client (and the contract test) knows each format's.
_BEST_CONTENT: dict[int | str, dict[str, Any]] = {
    200: {"description": "the export", "content": {"application/json": {}, "text/x-c": {}}}
}
_TRIALS_CONTENT: dict[int | str, dict[str, Any]] = {
    200: {"description": "the job's trials", "content": {"application/json": {}, "text/csv": {}}}
}


@router.get("/best/export", responses=_BEST_CONTENT)
def export_best(
    _: ReadToken,
    session: SessionDep,
    kernel: Annotated[str, Query(min_length=1, max_length=128)],
    format: Literal["json", "header", "triton"] = "json",
    gpu: GpuFilter = [],  # noqa: B006
    problem: ProblemFilter = [],  # noqa: B006
) -> Response:
    """The best verified config of a kernel for every GPU model and problem recorded (or those
    filtered): ``json`` (the farm's versioned schema), ``header`` (C/C++ header, text) or ``triton``
    (``{"files": {file name: text}}``, one vLLM-layout file per device). See docs/EXPORTS.md."""
    spec = get_kernel(kernel)
    try:
        models = [model_slug(g) for g in gpu]
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    export = exports_service.best_export(session, spec, models, parse_problem(problem))
    if format == "header":
        return Response(header.write(export), media_type="text/x-c")
    if format == "triton":
        return JSONResponse({"files": triton.write(export)})
    return Response(json_format.write(export), media_type="application/json")


@router.get("/jobs/{job_id}/export", responses=_TRIALS_CONTENT)
def export_trials(
    job_id: uuid.UUID, _: ReadToken, session: SessionDep, format: Literal["kernel_tuner", "t4", "csv"] = "kernel_tuner"
) -> Response:
    """A job's trials: ``kernel_tuner`` (a Kernel Tuner cache file), ``t4`` (the Open Autotuning
    Results Schema) or ``csv``."""
    job = job_store.get_job(session, job_id)
    # The version the job measured, not the kernel's latest: a later upload may rename parameters.
    spec = get_kernel(job.kernel_name, job_store.kernel_version(session, job))
    export = exports_service.trials_export(session, spec, job)
    if format == "csv":
        return Response(csv_format.write(export), media_type="text/csv")
    return Response((kernel_tuner if format == "kernel_tuner" else t4).write(export), media_type="application/json")
