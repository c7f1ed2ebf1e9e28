"""GPU worker registry: registration, heartbeats stamped by the database clock, liveness."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from kernelfarm.core.models import GpuWorker
from kernelfarm.core.store.text import storable


@dataclass(frozen=True)
class WorkerIdentity:
    name: str
    hostname: str
    backend: str
    gpu_model: str
    gpu_name: str
    queue: str
    gpu_uuid: str | None = None
    compute_capability: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    # kernel plugins and opt-ins the worker has (core/capabilities.py)
    capabilities: tuple[str, ...] = ()


def register_worker(session: Session, identity: WorkerIdentity) -> None:
    values = storable(identity.__dict__) | {
        "last_heartbeat": func.now(), "stopped_at": None, "capabilities": sorted(identity.capabilities),
    }  # fmt: skip
    statement = insert(GpuWorker).values(**values, started_at=func.now())
    session.execute(statement.on_conflict_do_update(index_elements=["name"], set_=values))


def heartbeat_worker(session: Session, name: str) -> None:
    session.execute(update(GpuWorker).where(GpuWorker.name == name).values(last_heartbeat=func.now(), stopped_at=None))


def stop_worker(session: Session, name: str) -> None:
    session.execute(update(GpuWorker).where(GpuWorker.name == name).values(stopped_at=func.now()))


def live_clause(ttl_seconds: float):
    return (GpuWorker.stopped_at.is_(None)) & (GpuWorker.last_heartbeat > func.now() - timedelta(seconds=ttl_seconds))


def live_workers(session: Session, ttl_seconds: float, gpu_model: str | None = None) -> Sequence[GpuWorker]:
    query = select(GpuWorker).where(live_clause(ttl_seconds)).order_by(GpuWorker.gpu_model, GpuWorker.name)
    if gpu_model is not None:
        query = query.where(GpuWorker.gpu_model == gpu_model)
    return session.execute(query).scalars().all()


def all_workers(session: Session) -> Sequence[GpuWorker]:
    return session.execute(select(GpuWorker).order_by(GpuWorker.gpu_model, GpuWorker.name)).scalars().all()


def known_architectures(session: Session) -> dict[str, str | None]:
    """GPU model → compute capability, from every worker ever seen (for the lookup fallback)."""
    rows = session.execute(select(GpuWorker.gpu_model, GpuWorker.compute_capability)).all()
    out: dict[str, str | None] = {}
    for model, capability in rows:
        out[model] = out.get(model) or capability
    return out
