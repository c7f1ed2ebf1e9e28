"""Kernels: the catalogue (with plugin kernels) and uploaded kernel manifests, with their versions.

``POST /v1/kernels`` takes a multipart form: ``manifest`` (a TOML or JSON file) and ``files`` (the
sources and headers it names, the naive reference source, the recorded Kernel Tuner cache file).
The upload is checked as a whole before anything is stored (kernels/manifest/bundle.py); a bad one
is a 422 naming the field and why. Versions are immutable and content-addressed: uploading the same
content again answers the version that holds it (200), new content becomes the next version (201).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Annotated, TypeVar

from fastapi import APIRouter, File, Query, Response, UploadFile, status

from kernelfarm.api.deps import KernelsToken, ReadToken, SessionDep
from kernelfarm.api.schemas import KernelPublic, KernelVersionPublic, ProblemParamPublic
from kernelfarm.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from kernelfarm.core.models import KernelVersion
from kernelfarm.core.store import kernel_versions as version_store
from kernelfarm.core.store.tokens import Scope
from kernelfarm.kernels.manifest.bundle import Bundle, canonical_json, check_bundle, parse_manifest_text
from kernelfarm.kernels.registry import all_kernels, kernel_at_version
from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.kernels.uploaded import spec_of_row

logger = logging.getLogger(__name__)
T = TypeVar("T")

router = APIRouter(prefix="/v1/kernels", tags=["kernels"])
KERNEL_UPLOAD_PATH = "/v1/kernels"
MAX_FILES = 20


def to_public(spec: KernelSpec, origin: str = "catalogue") -> KernelPublic:
    problem = spec.normalize_problem(spec.default_problem)
    return KernelPublic(
        name=spec.name,
        version=spec.version,
        source_hash=spec.source_hash,
        description=spec.description,
        backends=sorted(spec.backends),
        parameters={p.name: list(p.values) for p in spec.space.parameters},
        constraints=list(spec.space.constraints),
        problem_params=[
            ProblemParamPublic(name=p.name, kind=p.kind, choices=list(p.choices) if p.choices else None)
            for p in spec.problem_params
        ],
        default_problem=problem,
        valid_configs_default_problem=len(spec.space.valid_indices(problem)),
        recorded_gpu_models=sorted(spec.recordings.gpu_models) if spec.recordings else [],
        origin="plugin" if any(r.startswith("plugin:") for r in spec.requires) else origin,
        requires=sorted(spec.requires),
    )


def version_public(row: KernelVersion, created: bool = False) -> KernelVersionPublic:
    manifest = json.loads(row.manifest)
    return KernelVersionPublic(
        name=row.name,
        version=row.version,
        content_hash=row.content_hash,
        source_hash=spec_of_row(row).source_hash,
        owner=row.owner,
        created_at=row.created_at,
        files=sorted(row.files),
        recording=manifest.get("recording", {}).get("file"),
        manifest=manifest,
        created=created,
    )


@router.get("", response_model=list[KernelPublic])
def list_kernels(_: ReadToken, session: SessionDep) -> list[KernelPublic]:
    """The catalogue and plugin kernels, then the latest version of every uploaded kernel that still
    builds (GET /v1/kernels/{name} says why one does not)."""
    latest = version_store.latest_versions(session)
    uploaded = _each_that_builds(latest, lambda row: to_public(spec_of_row(row), "upload"))
    return [to_public(spec) for spec in all_kernels().values()] + uploaded


def _each_that_builds(rows: Sequence[KernelVersion], public: Callable[[KernelVersion], T]) -> list[T]:
    """``public`` of each stored version that still builds; one stored before a check it now fails (an
    include the upload check refuses since) is left out with a warning in the API's log, rather than
    making a whole listing a 4xx for every reader."""
    out = []
    for row in rows:
        try:
            out.append(public(row))
        except InvalidInput as exc:
            logger.warning("kernel %r version %d is left out of a listing: %s", row.name, row.version, exc)
    return out


@router.post("", response_model=KernelVersionPublic, status_code=status.HTTP_201_CREATED)
def upload_kernel(
    principal: KernelsToken,
    session: SessionDep,
    response: Response,
    # A part without a file name is a plain form field to Starlette: taken as text here so that it
    # gets a reason below rather than FastAPI's "Expected UploadFile" with the manifest echoed back.
    manifest: Annotated[UploadFile | str, File(description="the manifest, TOML (*.toml) or JSON")],
    files: Annotated[list[UploadFile | str] | None, File(description="the files the manifest names")] = None,
) -> KernelVersionPublic:
    bundle = _checked_upload(manifest, files or [])
    if bundle.has_python and Scope.ADMIN not in principal.scopes:
        # Python is host code execution: docs/SECURITY.md, "Kernel trust".
        raise Forbidden(
            f"manifest.reference.python: uploading Python needs the admin scope; token {principal.name!r} lacks it"
        )
    if bundle.name in all_kernels():
        raise Conflict(f"manifest.name: {bundle.name!r} is a catalogue or plugin kernel; choose another name")
    row, created = version_store.add_version(
        session,
        version_store.NewVersion(
            name=bundle.name,
            content_hash=bundle.content_hash,
            manifest=canonical_json(bundle.manifest_dict),
            files=dict(bundle.files),
            recording=bundle.recording,
            owner=principal.name,
            by_admin=Scope.ADMIN in principal.scopes,
        ),
    )
    public = version_public(row, created)
    if not created:
        response.status_code = status.HTTP_200_OK
    return public


def _checked_upload(manifest: UploadFile | str, files: list[UploadFile | str]) -> Bundle:
    if isinstance(manifest, str):
        raise InvalidInput(
            "manifest: send it as a file, a multipart part with a file name (axpb.toml or axpb.json, which says "
            "how to read it; curl -F manifest=@axpb.toml), not as a form field"
        )
    if len(files) > MAX_FILES:
        raise InvalidInput(f"files: at most {MAX_FILES} files")
    data = parse_manifest_text(manifest.file.read(), manifest.filename or "manifest.json")
    uploads: dict[str, bytes] = {}
    for upload in files:
        if isinstance(upload, str) or not (name := (upload.filename or "").rsplit("/", 1)[-1]):
            raise InvalidInput("files: every file needs a file name (a part without one is a form field)")
        if name in uploads:
            raise InvalidInput(f"files: {name!r} is uploaded twice")
        uploads[name] = upload.file.read()
    return check_bundle(data, uploads)


@router.get("/{name}", response_model=KernelPublic)
def show_kernel(
    name: str,
    _: ReadToken,
    version: Annotated[
        int | None, Query(ge=1, le=2**31 - 1, description="the kernel's version (404 when it has no such version)")
    ] = None,
) -> KernelPublic:
    # A version the kernel does not have is a 404 saying so, a catalogue kernel's too (get_kernel serves
    # the installed one whatever version is asked: a reader got version 1 for ?version=99).
    spec = kernel_at_version(name, version)
    return to_public(spec, "catalogue" if name in all_kernels() else "upload")


@router.get("/{name}/versions", response_model=list[KernelVersionPublic])
def list_versions(name: str, _: ReadToken, session: SessionDep) -> list[KernelVersionPublic]:
    rows = version_store.versions(session, name)
    if not rows:
        raise NotFound(
            f"no uploaded kernel {name!r}" + (" (it is a catalogue kernel)" if name in all_kernels() else "")
        )
    return _each_that_builds(rows, version_public)
