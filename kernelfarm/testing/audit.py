"""Ground truth and bookkeeping checks for fault-injection runs.

Two independent witnesses, neither of them the code under test:

- a PostgreSQL trigger (installed by the harness on its own database, not by the migrations) that
  logs every state transition of every trial, so "counted once" is checked as "exactly one
  transition into complete/failed per trial", not inferred from the final rows;
- the recorded landscape itself, replayed in-process, which gives the outcome a fault-free run
  must produce for every config. The chaos job measures its whole (restricted) space, so the set
  of configs is fixed and its best config does not depend on completion order (random search
  draws from an RNG seeded by the history length, so with a budget smaller than the space the
  SET of proposals legitimately differs with timing; with budget >= valid space it cannot).
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import create_engine, text

from kernelfarm.kernels.registry import get_kernel
from kernelfarm.worker.backends.base import MeasureRequest
from kernelfarm.worker.backends.replay import ReplayBackend

AUDIT_SQL = """
CREATE TABLE IF NOT EXISTS chaos_trial_transitions (
    id bigserial PRIMARY KEY, trial_id bigint NOT NULL, attempt int NOT NULL,
    old_state text NOT NULL, new_state text NOT NULL, worker_name text,
    at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE OR REPLACE FUNCTION chaos_audit_trial() RETURNS trigger AS $$
BEGIN
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        INSERT INTO chaos_trial_transitions (trial_id, attempt, old_state, new_state, worker_name)
        VALUES (NEW.id, NEW.attempt, OLD.state, NEW.state, NEW.worker_name);
    END IF;
    RETURN NEW;
END $$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS chaos_audit_trial ON trials;
CREATE TRIGGER chaos_audit_trial AFTER UPDATE ON trials FOR EACH ROW EXECUTE FUNCTION chaos_audit_trial();
"""
TERMINAL = ("complete", "failed")


def install_audit(database_url: str) -> None:
    engine = create_engine(database_url)
    with engine.begin() as connection:
        connection.execute(text(AUDIT_SQL))
    engine.dispose()


@dataclass(frozen=True)
class Expected:
    """What a fault-free run of the space must record, config key → (state, time_ms | failure kind)."""

    outcomes: dict[str, tuple[str, Any]]

    @property
    def best(self) -> tuple[float, set[str]]:
        times = {k: v for k, (s, v) in self.outcomes.items() if s == "complete"}
        fastest = min(times.values())
        return fastest, {k for k, t in times.items() if t == fastest}


def expected_outcomes(landscape_path: Any, kernel: str, parameters: dict[str, list[Any]],
                      constraints: list[str]) -> Expected:  # fmt: skip
    spec = get_kernel(kernel)
    space = spec.space.restrict(parameters, constraints)
    backend = ReplayBackend([landscape_path])
    problem = dict(spec.default_problem)
    outcomes: dict[str, tuple[str, Any]] = {}
    for row in space.valid_indices(problem):
        config = space.config_at(row)
        m = backend.measure(MeasureRequest(kernel_name=kernel, problem=problem, config=config, profile=False, seed=0))
        key = space.key(config)
        if m.timing is not None:
            outcomes[key] = ("complete", m.timing.median_ms)
        else:
            outcomes[key] = ("failed", m.failure.value if m.failure else None)
    return Expected(outcomes)


@dataclass
class Verdict:
    expected: int
    trials: int
    lost: list[str] = field(default_factory=list)  # expected configs with no terminal trial
    extra: list[str] = field(default_factory=list)  # configs measured that the space does not hold
    duplicate_configs: list[str] = field(default_factory=list)  # a config evaluated by two trials
    double_counted: list[int] = field(default_factory=list)  # trials that reached a terminal state twice
    changed_after_finish: list[int] = field(default_factory=list)
    wrong_outcome: list[str] = field(default_factory=list)  # differs from the recording (not a crash cap)
    crash_capped: list[str] = field(default_factory=list)  # failed "crash" at the retry cap
    retried: int = 0  # trials claimed more than once (their worker was lost)
    job_state: str = ""
    best_ok: bool = False
    best_detail: str = ""

    @property
    def ok(self) -> bool:
        faults = (self.lost, self.extra, self.duplicate_configs, self.double_counted, self.changed_after_finish,
                  self.wrong_outcome)  # fmt: skip
        return self.job_state == "complete" and not any(faults) and self.best_ok

    def summary(self) -> dict[str, Any]:
        return {"ok": self.ok, "job_state": self.job_state, "expected": self.expected, "trials": self.trials,
                "lost": len(self.lost), "double_counted": len(self.double_counted),
                "duplicate_configs": len(self.duplicate_configs), "extra": len(self.extra),
                "changed_after_finish": len(self.changed_after_finish), "wrong_outcome": len(self.wrong_outcome),
                "crash_capped": len(self.crash_capped), "retried": self.retried, "best_ok": self.best_ok,
                "best": self.best_detail}  # fmt: skip


def verify(database_url: str, job_id: uuid.UUID | str, expected: Expected, api_best: dict[str, Any] | None) -> Verdict:
    engine = create_engine(database_url)
    with engine.connect() as connection:
        job_state = connection.execute(text("SELECT state FROM jobs WHERE id = :j"), {"j": str(job_id)}).scalar_one()
        rows = connection.execute(
            text("SELECT id, config_key, state, time_ms, failure_kind, attempt FROM trials WHERE job_id = :j"),
            {"j": str(job_id)},
        ).all()
        transitions = connection.execute(
            text("SELECT t.trial_id, t.old_state, t.new_state FROM chaos_trial_transitions t "
                 "JOIN trials ON trials.id = t.trial_id WHERE trials.job_id = :j ORDER BY t.id"),
            {"j": str(job_id)},
        ).all()  # fmt: skip
    engine.dispose()
    verdict = Verdict(expected=len(expected.outcomes), trials=len(rows), job_state=job_state)
    keys = Counter(r.config_key for r in rows)
    verdict.duplicate_configs = sorted(k for k, n in keys.items() if n > 1)
    verdict.extra = sorted(set(keys) - set(expected.outcomes))
    finished = {r.config_key for r in rows if r.state in TERMINAL}
    verdict.lost = sorted(set(expected.outcomes) - finished)
    terminal_writes = Counter(t.trial_id for t in transitions if t.new_state in TERMINAL)
    verdict.double_counted = sorted(i for i, n in terminal_writes.items() if n > 1)
    verdict.changed_after_finish = sorted({t.trial_id for t in transitions if t.old_state in TERMINAL})
    verdict.retried = sum(1 for r in rows if r.attempt > 1)
    for r in rows:
        want = expected.outcomes.get(r.config_key)
        if want is None or r.state not in TERMINAL:
            continue
        if r.state == "failed" and r.failure_kind == "crash" and want != ("failed", "crash"):
            verdict.crash_capped.append(r.config_key)
        elif (r.state, r.time_ms if r.state == "complete" else r.failure_kind) != want:
            verdict.wrong_outcome.append(r.config_key)
    fastest, keys_of_fastest = expected.best
    if api_best is None:
        verdict.best_detail = "the API reported no best config"
    else:
        verdict.best_ok = api_best["time_ms"] == fastest and api_best["config_key"] in keys_of_fastest
        verdict.best_detail = (f"job best {api_best['config_key']} {api_best['time_ms']} ms; "
                               f"fault-free best {sorted(keys_of_fastest)} {fastest} ms")  # fmt: skip
    return verdict
