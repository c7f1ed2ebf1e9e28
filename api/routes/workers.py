"""Online workers and the GPU models they serve."""

from __future__ import annotations

from fastapi import APIRouter

from kernelfarm.api.deps import ReadToken, SessionDep, SettingsDep
from kernelfarm.api.schemas import GpuModelPublic, WorkerPublic
from kernelfarm.core.store import workers as worker_store

router = APIRouter(prefix="/v1", tags=["workers"])


@router.get("/workers", response_model=list[WorkerPublic])
def list_workers(_: ReadToken, session: SessionDep, settings: SettingsDep, all: bool = False) -> list[WorkerPublic]:
    """Live workers (heartbeat within the worker TTL); ``all=true`` includes stopped and dead ones."""
    live = {w.name for w in worker_store.live_workers(session, settings.worker_ttl_seconds)}
    rows = worker_store.all_workers(session) if all else worker_store.live_workers(session, settings.worker_ttl_seconds)
    return [WorkerPublic.model_validate(w).model_copy(update={"live": w.name in live}) for w in rows]


@router.get("/gpu-models", response_model=list[GpuModelPublic])
def list_gpu_models(_: ReadToken, session: SessionDep, settings: SettingsDep) -> list[GpuModelPublic]:
    models: dict[str, GpuModelPublic] = {}
    for w in worker_store.live_workers(session, settings.worker_ttl_seconds):
        entry = models.setdefault(w.gpu_model, GpuModelPublic(gpu_model=w.gpu_model, gpu_name=w.gpu_name,
                                                              live_workers=0, backends=[]))  # fmt: skip
        entry.live_workers += 1
        if w.backend not in entry.backends:
            entry.backends.append(w.backend)
    return list(models.values())
