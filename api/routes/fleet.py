"""The fleet at a glance: load per GPU model (queue depth, busy fraction), workers, recent failures."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from kernelfarm.api.deps import ReadToken, SessionDep, SettingsDep
from kernelfarm.api.insight_schemas import FailurePublic, FleetPublic, FleetWorkerPublic, GpuModelLoadPublic
from kernelfarm.api.jobs_service import memory_limit
from kernelfarm.core.store import fleet as fleet_store
from kernelfarm.core.store import workers as worker_store

router = APIRouter(prefix="/v1", tags=["workers"])


@router.get("/fleet", response_model=FleetPublic)
def fleet(
    _: ReadToken, session: SessionDep, settings: SettingsDep, failures: Annotated[int, Query(ge=0, le=200)] = 20
) -> FleetPublic:
    live = worker_store.live_workers(session, settings.worker_ttl_seconds)
    summary = fleet_store.trial_summary(session)
    busy, loads = summary.busy, summary.loads
    models: dict[str, GpuModelLoadPublic] = {}
    for model in sorted({w.gpu_model for w in live} | set(loads)):
        workers = [w for w in live if w.gpu_model == model]
        busy_count = sum(1 for w in workers if busy.get(w.name))
        load = loads.get(model, fleet_store.ModelLoad())
        models[model] = GpuModelLoadPublic(
            gpu_model=model, live_workers=len(workers), busy_workers=busy_count,
            busy_fraction=busy_count / len(workers) if workers else 0.0, queued_trials=load.queued_trials,
            running_trials=load.running_trials, waiting_jobs=load.waiting_jobs,
            problem_memory_limit_bytes=memory_limit(session, model, settings)[0],
        )  # fmt: skip
    return FleetPublic(
        gpu_models=list(models.values()),
        workers=[
            FleetWorkerPublic.model_validate(w, from_attributes=True).model_copy(
                update={"running_trials": busy.get(w.name, 0)}
            )
            for w in live
        ],
        recent_failures=[FailurePublic(**f.__dict__) for f in fleet_store.recent_failures(session, failures)],
    )
