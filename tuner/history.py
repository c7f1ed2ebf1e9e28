"""Trials as the optimizer sees them: observations, pending ones included, and warm-start priors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from kernelfarm.core.models import Job, Trial
from kernelfarm.core.space import SearchSpace
from kernelfarm.core.states import FailureKind, TrialState
from kernelfarm.tuner.objective import scalarize
from kernelfarm.tuner.strategies.base import Observation

PRIOR_LIMIT = 2000


def observations(
    trials: Sequence[Trial] | Sequence[Row[Any]], objective: str = "time", seed: int = 0
) -> list[Observation]:
    """Trials as observations; ``objective`` picks the value (tuner/objective.py)."""
    trials = list[Any](trials)  # ORM rows or the coordinator's column rows: same attribute names
    done = [TrialState(t.state) == TrialState.COMPLETE and bool(t.verified) and t.time_ms is not None for t in trials]
    times = [float(t.time_ms) if ok else None for t, ok in zip(trials, done, strict=True)]
    energies = [_energy(t) if ok else None for t, ok in zip(trials, done, strict=True)]
    values = scalarize(times, energies, objective, (seed & 0xFFFFFFFF, len(trials)))
    out = []
    for trial, ok, value in zip(trials, done, values, strict=True):
        state = TrialState(trial.state)
        origin = _origin(trial)
        if ok and value is not None:
            out.append(Observation(dict(trial.config), value, origin=origin))
        elif ok:  # measured, but no energy (metrics energy_missing says why): a failure to rank, never best
            out.append(Observation(dict(trial.config), None, FailureKind.CRASH, origin=origin))
        elif state == TrialState.FAILED:
            out.append(Observation(dict(trial.config), None, _failure_kind(trial.failure_kind), origin=origin))
        elif state in (TrialState.QUEUED, TrialState.RUNNING):
            out.append(Observation(dict(trial.config), None, pending=True, origin=origin))
        # cancelled trials teach nothing but must not be proposed again: treat as pending.
        else:
            out.append(Observation(dict(trial.config), None, pending=True, origin=origin))
    return out


def _failure_kind(stored: str | None) -> FailureKind:
    """A stored failure kind, or crash for one this version does not know: workers write only known
    kinds, but a row written by hand or by another version raised here, and every later step of every
    job that read it as a prior failed with it."""
    try:
        return FailureKind(stored or FailureKind.CRASH.value)
    except ValueError:
        return FailureKind.CRASH


def _energy(trial: Trial | Row[Any]) -> float | None:
    raw = (trial.metrics or {}).get("energy_mj") if isinstance(trial, Trial) else getattr(trial, "energy_mj", None)
    try:
        return float(raw) if raw is not None else None
    except (TypeError, ValueError):
        return None


def _origin(trial: Trial | Row[Any]) -> str | None:
    """ "llm" for a trial an LLM arm proposed (provenance ``proposed_by`` = "llm:MODEL")."""
    if isinstance(trial, Trial):
        proposed = (trial.provenance or {}).get("proposed_by")
    else:
        proposed = getattr(trial, "proposed_by", None)
    return str(proposed).split(":", 1)[0] if proposed else None


def prior_observations(session: Session, job: Job, space: SearchSpace) -> list[Observation]:
    """Warm start across GPUs: finished trials of the same kernel and problem measured on *other*
    GPU models, newest first, restricted to configs of this job's space. Each observation's
    ``source`` is its GPU model, because times of different GPUs share no scale (the strategy
    learns how far each carries over; tuner/strategies/transfer.py)."""
    rows = session.execute(
        select(Trial)
        .where(
            Trial.kernel_name == job.kernel_name,
            Trial.problem_key == job.problem_key,
            Trial.gpu_model != job.gpu_model,
            Trial.state.in_([TrialState.COMPLETE.value, TrialState.FAILED.value]),
        )
        .order_by(Trial.finished_at.desc())
        .limit(PRIOR_LIMIT)
    ).scalars()
    trials = list(rows)
    found = observations(trials)
    return [
        replace(o, source=trial.gpu_model)
        for o, trial in zip(found, trials, strict=True)
        if not o.pending and space.contains(o.config, job.problem)
    ]


def prior_use(prior: Sequence[Observation], dropped: bool = False, waiting: bool = False) -> dict[str, Any]:
    """What describe_prior says, as the job keeps it (``jobs.warm_start_prior``): how many trials from
    which GPU models, and ``state``: "in_use", "held_back" (the gate has not admitted them yet),
    "dropped", or "none" (no other GPU model has tuned this kernel and problem)."""
    state = "none" if not prior else "dropped" if dropped else "held_back" if waiting else "in_use"
    return {"trials": len(prior), "sources": sorted({o.source or "?" for o in prior}), "state": state}


def describe_prior(prior: Sequence[Observation], dropped: bool = False, waiting: bool = False) -> str:
    """What a job's status says about its warm start, e.g. "warm start: 180 trials from A100, RTX 3090";
    ``dropped``: the strategy's gate set the prior aside (it ranks the job's own measurements otherwise,
    or its best config measured slower than the job's best);
    ``waiting``: the gate has not admitted it yet (the job runs as a cold one meanwhile)."""
    if not prior:
        return "cold start: no other GPU has tuned this kernel and problem"
    sources = sorted({o.source or "?" for o in prior})
    text = f"warm start: {len(prior)} trials from {', '.join(sources)}"
    if dropped:
        # the gate drops a prior whose ranking of the job's configs disagrees, or whose best config
        # (the probe) is slower than the job's own best so far: one wording for both
        return text + " (dropped: this job's own measurements disagree with them)"
    if waiting:
        return text + " (held back until this job's own measurements show they rank its configs alike)"
    return text
