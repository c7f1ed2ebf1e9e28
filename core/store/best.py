"""Best-config lookup with a documented fallback order.

1. ``exact``: same kernel source, GPU model and problem.
2. ``nearest_problem``: same GPU model, the recorded problem nearest to the one asked for
   (the kernel's problem_distance; for a KernelSpec the sum of |log2 ratio| of integer dimensions, dtype
   must match).
3. ``same_architecture``: another GPU model of the same compute capability, exact problem first,
   then nearest.
4. nothing: NotFound, saying what was searched.

Only complete, verified trials of the kernel's current source count: failed, unverified and
stale-source measurements never become "best".

Every write that may change an answer bumps a stamp in ``best_versions`` in the same transaction
(database triggers, migrations/versions/0003_best_versions.py): :func:`answer_versions` reads them
so that callers can cache answers (api/best_cache.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.orm import Session

from kernelfarm.core.errors import NotFound
from kernelfarm.core.models import BestVersion, Job, Kernel, Trial
from kernelfarm.core.objectives import ENERGY_MISSING
from kernelfarm.core.states import TrialState
from kernelfarm.core.store.workers import known_architectures
from kernelfarm.core.stored_kernel import StoredKernel

# The stamp of the GPU worker registry (the same-architecture fallback); the others are kernel names.
REGISTRY_SCOPE = ""


def answer_versions(session: Session) -> dict[str, int]:
    """Stamp per kernel name (and :data:`REGISTRY_SCOPE`); a scope without a row is at 0.

    An answer computed from reads that started after these stamps were read is still the answer
    while they are unchanged: the stamp a write bumps commits with the write."""
    return {scope: version for scope, version in session.execute(select(BestVersion.scope, BestVersion.version))}


@dataclass(frozen=True)
class BestMatch:
    trial: Trial
    job: Job
    match: str  # "exact" | "nearest_problem" | "same_architecture"
    problem: dict[str, Any]
    gpu_model: str


def find_best(session: Session, spec: StoredKernel, problem: Mapping[str, Any], gpu_model: str) -> BestMatch:
    exact_key = spec.problem_key(problem)
    exact = _exact(session, spec, exact_key, gpu_model)
    if exact is not None:  # the common case, one indexed query
        trial, job = exact
        return BestMatch(trial=trial, job=job, match="exact", problem=dict(job.problem), gpu_model=gpu_model)
    candidates = _measured_problems(session, spec)
    same_model = [c for c in candidates if c[1] == gpu_model]
    found = _pick(session, spec, problem, exact_key, same_model)
    if found is not None:
        job, level = found
        return _best_of(session, spec, job, "exact" if level == 0 else "nearest_problem")
    architectures = known_architectures(session)
    capability = architectures.get(gpu_model)
    if capability:
        siblings = {m for m, c in architectures.items() if c == capability and m != gpu_model}
        found = _pick(session, spec, problem, exact_key, [c for c in candidates if c[1] in siblings])
        if found is not None:
            return _best_of(session, spec, found[0], "same_architecture")
    raise NotFound(
        f"no verified measurement of {spec.name} for {gpu_model}: none for this problem, none for another "
        f"problem on this GPU model, and none on a GPU of the same architecture"
        + (
            ""
            if capability
            else " (architecture of this GPU model unknown: no worker of it has reported a compute capability)"
        )
    )


_kernel_ids: dict[tuple[str, str], list[int]] = {}


def _current_kernel_ids(session: Session, spec: StoredKernel) -> list[int]:
    """Rows of the kernel's current source. Cached once found: a (name, version, hash) row never
    changes, and a new source gets a new hash."""
    key = (spec.name, spec.source_hash)
    if key not in _kernel_ids:
        ids = list(
            session.execute(
                select(Kernel.id).where(Kernel.name == spec.name, Kernel.source_hash == spec.source_hash)
            ).scalars()
        )
        if not ids:
            return []
        _kernel_ids[key] = ids
    return _kernel_ids[key]


def _complete_trials_of(spec: StoredKernel, problem_key: str, gpu_model: str, kernel_ids: list[int]) -> tuple[Any, ...]:
    """Conditions for the complete trials of one kernel (its current source), problem and GPU model:
    what the best, the energy front and its explanation all read (with ``Trial`` joined to ``Job``)."""
    return (
        Trial.kernel_name == spec.name,
        Trial.gpu_model == gpu_model,
        Trial.problem_key == problem_key,
        Trial.state == TrialState.COMPLETE.value,
        Job.kernel_id.in_(kernel_ids),
    )


def _exact(session: Session, spec: StoredKernel, problem_key: str, gpu_model: str) -> tuple[Trial, Job] | None:
    kernel_ids = _current_kernel_ids(session, spec)
    if not kernel_ids:
        return None
    row = session.execute(
        select(Trial, Job)
        .join(Job, Job.id == Trial.job_id)
        .where(*_complete_trials_of(spec, problem_key, gpu_model, kernel_ids), Trial.verified.is_(True))
        .order_by(Trial.time_ms.asc(), Trial.id.asc())
        .limit(1)
    ).first()
    return (row[0], row[1]) if row is not None else None


def _measured_problems(session: Session, spec: StoredKernel) -> list[tuple[str, str, dict[str, Any]]]:
    """(problem_key, gpu_model, problem) for which a verified complete trial exists."""
    kernel_ids = _current_kernel_ids(session, spec)
    if not kernel_ids:
        return []
    measured = (
        select(Trial.job_id)
        .where(Trial.state == TrialState.COMPLETE.value, Trial.verified.is_(True))
        .where(Trial.job_id == Job.id)
        .exists()
    )
    rows = session.execute(
        select(Job.problem_key, Job.gpu_model, Job.problem)
        .where(Job.kernel_id.in_(kernel_ids), measured)
        .ext(distinct_on(Job.problem_key, Job.gpu_model))
    ).all()
    return [(r.problem_key, r.gpu_model, dict(r.problem)) for r in rows]


def _pick(
    session: Session,
    spec: StoredKernel,
    problem: Mapping[str, Any],
    exact_key: str,
    candidates: list[tuple[str, str, dict[str, Any]]],
) -> tuple[Job, int] | None:
    """The job group to read from: exact problem (level 0) or the nearest one (level 1)."""
    if not candidates:
        return None
    exact = [c for c in candidates if c[0] == exact_key]
    if exact:
        chosen, level = exact, 0
    else:
        scored = [(spec.problem_distance(problem, c[2]), c) for c in candidates]
        finite = [s for s in scored if math.isfinite(s[0])]
        if not finite:
            return None
        nearest = min(s[0] for s in finite)
        chosen, level = [c for d, c in finite if d == nearest], 1
    # The first by problem key, then GPU model, in code-point order: the rows come in the order
    # DISTINCT ON sorted them, which is the database's collation (en_US and C order "M=512,..." and
    # "M=5120,..." differently), and the SDK's offline lookup breaks the tie in Python's order.
    key, model = min((c[0], c[1]) for c in chosen)
    job = session.execute(
        select(Job).where(Job.kernel_name == spec.name, Job.problem_key == key, Job.gpu_model == model).limit(1)
    ).scalar_one()
    return job, level


def _best_of(session: Session, spec: StoredKernel, job: Job, match: str) -> BestMatch:
    found = _exact(session, spec, job.problem_key, job.gpu_model)
    assert found is not None  # the group was chosen because it has a verified complete trial
    trial, best_job = found
    return BestMatch(trial=trial, job=best_job, match=match, problem=dict(best_job.problem), gpu_model=job.gpu_model)


def energy_front(session: Session, spec: StoredKernel, problem: Mapping[str, Any], gpu_model: str) -> list[Trial]:
    """The exact match's verified trials that carry an energy per launch and that no other such
    trial beats in both time and energy (the Pareto front), fastest first; one per config (its
    fastest trial).

    Raises:
        NotFound: no energy was measured for this kernel, GPU model and problem (energy needs a
            cuda worker whose GPU has NVML's energy counter); no fallback: another GPU's energy
            says little about this one's.
    """
    kernel_ids = _current_kernel_ids(session, spec)
    energy = Trial.metrics["energy_mj"].astext
    rows = (
        session.execute(
            select(Trial)
            .join(Job, Job.id == Trial.job_id)
            .where(
                *_complete_trials_of(spec, spec.problem_key(problem), gpu_model, kernel_ids),
                Trial.verified.is_(True),
                energy.is_not(None),
            )
            .order_by(Trial.time_ms.asc(), Trial.id.asc())
        )
        .scalars()
        .all()
        if kernel_ids
        else []
    )
    front: list[Trial] = []
    lowest = math.inf
    seen: set[str] = set()
    for trial in rows:  # fastest first: on the front iff less energy than every faster trial
        # One point per config, its fastest measurement: a config that several jobs measured would
        # otherwise stand on the front twice, its readings' noise posing as a trade-off.
        if trial.config_key in seen:
            continue
        seen.add(trial.config_key)
        value = float(trial.metrics["energy_mj"])
        if value < lowest:
            front.append(trial)
            lowest = value
    if not front:
        raise NotFound(
            f"no energy measured for kernel {spec.name!r} on GPU model {gpu_model!r} for this problem"
            + _why_no_energy(session, spec, problem, gpu_model, kernel_ids)
        )
    return front


def _why_no_energy(
    session: Session, spec: StoredKernel, problem: Mapping[str, Any], gpu_model: str, kernel_ids: list[int]
) -> str:
    """What the trials of energy jobs recorded instead of an energy reading (``energy_missing``), if any."""
    if not kernel_ids:
        return ""
    reason = Trial.metrics[ENERGY_MISSING].astext
    latest = session.execute(
        select(reason)
        .join(Job, Job.id == Trial.job_id)
        .where(*_complete_trials_of(spec, spec.problem_key(problem), gpu_model, kernel_ids), reason.is_not(None))
        .order_by(Trial.finished_at.desc(), Trial.id.desc())
        .limit(1)
    ).scalar_one_or_none()
    return f" (trials were metered but recorded no energy, latest: {latest})" if latest else ""
