"""The kernel catalogue with its parameter spaces."""

from __future__ import annotations

from fastapi import APIRouter

from kernelfarm.api.deps import ReadToken
from kernelfarm.api.schemas import KernelPublic, ProblemParamPublic
from kernelfarm.kernels.registry import all_kernels, get_kernel
from kernelfarm.kernels.spec import KernelSpec

router = APIRouter(prefix="/v1/kernels", tags=["kernels"])


def to_public(spec: KernelSpec) -> KernelPublic:
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
    )


@router.get("", response_model=list[KernelPublic])
def list_kernels(_: ReadToken) -> list[KernelPublic]:
    return [to_public(spec) for spec in all_kernels().values()]


@router.get("/{name}", response_model=KernelPublic)
def show_kernel(name: str, _: ReadToken) -> KernelPublic:
    return to_public(get_kernel(name))
