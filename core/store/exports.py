"""What the best-config exports read: the best verified trial per (GPU model, problem) of a kernel's
current source, and the device names the workers reported for each GPU model."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.orm import Session

from kernelfarm.core.models import GpuWorker, Job, Kernel, Trial
from kernelfarm.core.states import TrialState
from kernelfarm.core.stored_kernel import StoredKernel


def best_per_target(
    session: Session,
    spec: StoredKernel,
    gpu_models: Collection[str] | None = None,
    problem_keys: Collection[str] | None = None,
) -> list[tuple[Trial, Job]]:
    """The fastest complete, verified trial of the kernel's current source for every (GPU model,
    problem) measured, optionally only those GPU models and problems; ordered by model, problem."""
    kernel_ids = select(Kernel.id).where(Kernel.name == spec.name, Kernel.source_hash == spec.source_hash)
    query = (
        select(Trial, Job)
        .join(Job, Job.id == Trial.job_id)
        .where(
            Trial.kernel_name == spec.name,
            Trial.state == TrialState.COMPLETE.value,
            Trial.verified.is_(True),
            Job.kernel_id.in_(kernel_ids),
        )
        .ext(distinct_on(Trial.gpu_model, Trial.problem_key))
        .order_by(Trial.gpu_model, Trial.problem_key, Trial.time_ms.asc(), Trial.id.asc())
    )
    if gpu_models:
        query = query.where(Trial.gpu_model.in_(list(gpu_models)))
    if problem_keys:
        query = query.where(Trial.problem_key.in_(list(problem_keys)))
    return [(row[0], row[1]) for row in session.execute(query).all()]


def device_of_models(session: Session, gpu_models: Collection[str]) -> dict[str, GpuWorker]:
    """The most recently started worker row of each GPU model (its device name, compute capability,
    driver and CUDA versions)."""
    rows = session.execute(
        select(GpuWorker)
        .where(GpuWorker.gpu_model.in_(list(gpu_models)))
        .order_by(GpuWorker.gpu_model, GpuWorker.started_at.desc())
        .ext(distinct_on(GpuWorker.gpu_model))
    ).scalars()
    return {row.gpu_model: row for row in rows}
