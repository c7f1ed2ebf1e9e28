"""Kernels as rows: one per (name, version, source hash), so old trials keep their provenance."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from kernelfarm.core.models import Kernel
from kernelfarm.core.stored_kernel import StoredKernel


def ensure_kernel(session: Session, spec: StoredKernel) -> Kernel:
    statement = (
        insert(Kernel)
        .values(
            name=spec.name,
            version=spec.version,
            source_hash=spec.source_hash,
            space=spec.space.to_dict(),
            description=spec.description,
        )
        .on_conflict_do_nothing(index_elements=["name", "version", "source_hash"])
    )
    session.execute(statement)
    return session.execute(
        select(Kernel).where(
            Kernel.name == spec.name, Kernel.version == spec.version, Kernel.source_hash == spec.source_hash
        )
    ).scalar_one()
