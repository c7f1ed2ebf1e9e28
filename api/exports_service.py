"""Building the exports' data (core/exports/model.py) from the store's rows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from kernelfarm.core.errors import InvalidInput, NotFound
from kernelfarm.core.exports.model import BestEntry, BestExport, Toolchain, TrialRow, TrialsExport
from kernelfarm.core.models import Job, Trial
from kernelfarm.core.store import exports as export_store
from kernelfarm.core.store import trials as trial_store
from kernelfarm.kernels.spec import KernelSpec


def best_export(
    session: Session, spec: KernelSpec, gpu_models: list[str], problem_filter: dict[str, Any]
) -> BestExport:
    """Every (GPU model, problem) of the kernel, or those of ``gpu_models`` whose problem has every
    value of ``problem_filter``.

    Raises:
        InvalidInput: the filter names a dimension the kernel's problems do not have.
        NotFound: nothing matches.
    """
    names = [p.name for p in spec.problem_params]
    unknown = sorted(set(problem_filter) - set(names))
    if unknown:
        raise InvalidInput(f"{spec.name} has no problem dimension {unknown}; its problems have {names}")
    # A value no problem can have is a 422 naming it, as /v1/best answers, not "nothing matches".
    params = {p.name: p for p in spec.problem_params}
    problem_filter = {name: params[name].normalize(value) for name, value in problem_filter.items()}
    # Jobs stored before a problem dimension was added lack it: the spec says what they mean.
    rows = [
        (t, j, spec.stored_problem(j.problem))
        for t, j in export_store.best_per_target(session, spec, gpu_models or None)
    ]
    rows = [r for r in rows if all(str(r[2].get(k)) == str(v) for k, v in problem_filter.items())]
    if not rows:
        raise NotFound(f"no verified measurement of {spec.name} matches: GPU models {gpu_models or 'any'}, "
                       f"problem {problem_filter or 'any'}")  # fmt: skip
    devices = export_store.device_of_models(session, {t.gpu_model for t, _, _ in rows})
    entries = []
    for trial, job, problem in rows:
        device = devices.get(trial.gpu_model)
        prov = trial.provenance or {}
        entries.append(BestEntry(
            gpu_model=trial.gpu_model,
            gpu_name=prov.get("gpu_name") or (device.gpu_name if device else None),
            compute_capability=prov.get("compute_capability") or (device.compute_capability if device else None),
            problem=problem, problem_key=trial.problem_key,
            config=dict(trial.config), config_key=trial.config_key,
            time_ms=float(trial.time_ms or 0.0), time_p20_ms=trial.time_p20_ms, time_p80_ms=trial.time_p80_ms,
            toolchain=Toolchain.from_provenance(prov), trial_id=trial.id, job_id=str(job.id),
            measured_at=trial.finished_at, provenance=prov,
        ))  # fmt: skip
    return BestExport(
        kernel=spec.name, kernel_version=spec.version, source_hash=spec.source_hash,
        parameters=[p.name for p in spec.space.parameters], problem_params=names,
        default_problem=dict(spec.default_problem), default_problem_key=spec.problem_key(spec.default_problem),
        problem_key_defaults=spec.problem_key_defaults(), generated_at=datetime.now(UTC), entries=entries,
    )  # fmt: skip


def trials_export(session: Session, spec: KernelSpec, job: Job) -> TrialsExport:
    trials: list[Trial] = []
    while True:
        page, total = trial_store.list_trials(session, job.id, state=None, order="seq", limit=1000, offset=len(trials))
        trials += page
        if not page or len(trials) >= total:
            break
    if not trials:
        raise NotFound(f"job {job.id} has no trials yet")
    gpu_name = next((t.provenance.get("gpu_name") for t in trials if t.provenance.get("gpu_name")), None)
    if gpu_name is None:
        device = export_store.device_of_models(session, [job.gpu_model]).get(job.gpu_model)
        gpu_name = device.gpu_name if device else None
    return TrialsExport(
        kernel=spec.name, job_id=str(job.id), gpu_model=job.gpu_model, gpu_name=gpu_name, problem=dict(job.problem),
        parameters={p.name: list(p.values) for p in spec.space.parameters},
        trials=[
            TrialRow(
                seq=t.seq, config=dict(t.config), config_key=t.config_key, state=t.state, time_ms=t.time_ms,
                time_p20_ms=t.time_p20_ms, time_p80_ms=t.time_p80_ms, times_ms=t.times_ms, verified=t.verified,
                failure_kind=t.failure_kind, compile_seconds=(t.metrics or {}).get("compile_s"),
                finished_at=t.finished_at,
            )
            for t in trials
        ],
    )  # fmt: skip
