"""What the farm knows about one kernel: versions seen and best time per GPU model x problem."""

from __future__ import annotations

from fastapi import APIRouter

from kernelfarm.api.deps import ReadToken, SessionDep
from kernelfarm.api.insight_schemas import BestCellPublic, KernelResultsPublic, KernelVersionPublic
from kernelfarm.core.store.kernel_results import best_matrix, kernel_versions
from kernelfarm.kernels.registry import get_kernel

router = APIRouter(prefix="/v1/kernels", tags=["kernels"])


@router.get("/{name}/results", response_model=KernelResultsPublic)
def kernel_results(name: str, _: ReadToken, session: SessionDep) -> KernelResultsPublic:
    spec = get_kernel(name)  # 404 for an unknown kernel
    return KernelResultsPublic(
        kernel=spec.name,
        versions=[KernelVersionPublic(**v.__dict__) for v in kernel_versions(session, spec.name)],
        best=[BestCellPublic(**c.__dict__) for c in best_matrix(session, spec.name)],
    )
