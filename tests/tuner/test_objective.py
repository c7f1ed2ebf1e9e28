"""Objectives: time, energy, and both (a Pareto front by per-step Chebyshev scalarization)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row
from sqlalchemy.engine import result_tuple

from kernelfarm.core.states import TrialState
from kernelfarm.tuner.history import observations
from kernelfarm.tuner.objective import scalarize

# The columns of the coordinator's trial rows (core/store/trials.py history_rows), energy as JSON text.
TrialRow = result_tuple(["config", "state", "time_ms", "verified", "failure_kind", "proposed_by", "energy_mj"])


def row(
    i: int,
    time_ms: float | None,
    energy: float | None,
    state: TrialState = TrialState.COMPLETE,
    failure_kind: str | None = None,
) -> Row[Any]:
    return TrialRow(
        (
            {"x": i},
            state.value,
            time_ms,
            time_ms is not None,
            failure_kind,
            None,
            None if energy is None else str(energy),
        )
    )


def test_energy_objective_uses_energy_and_cannot_rank_a_trial_without_it() -> None:
    rows = [row(0, 1.0, 5.0), row(1, 2.0, 3.0), row(2, 1.5, None), row(3, None, None, TrialState.RUNNING)]
    obs = observations(rows, "energy")
    assert [o.value for o in obs] == [5.0, 3.0, None, None]
    assert obs[2].failure is not None and obs[3].pending
    assert [o.value for o in observations(rows, "time")][:3] == [1.0, 2.0, 1.5]


def test_both_never_ranks_a_dominated_trial_above_the_one_dominating_it() -> None:
    times = [1.0, 2.0, 4.0, 3.0]
    energies = [8.0, 4.0, 2.0, 5.0]  # trial 3 (3 ms, 5 mJ) is dominated by trial 1 (2 ms, 4 mJ)
    weights_seen = set()
    for step in range(50):
        values = scalarize(times, energies, "time+energy", (7, step))
        assert all(v is not None and v > 0 for v in values)
        assert values[3] > values[1]  # type: ignore[operator]
        weights_seen.add(min(range(3), key=lambda i: values[i]))  # type: ignore[arg-type, return-value]
    assert weights_seen == {0, 1, 2}  # different steps aim at different points of the front


def test_a_stored_failure_kind_this_version_does_not_know_reads_as_a_crash() -> None:
    """A row written by hand (or by another version) raised ValueError in every step that read it,
    the steps of every later job of its kernel and problem that took it as a prior included."""
    rows = [row(0, None, None, TrialState.FAILED, "__proto__"), row(1, None, None, TrialState.FAILED, "timeout")]
    assert [o.failure for o in observations(rows)] == ["crash", "timeout"]
