"""What a job can minimize, and which of those objectives need the GPU's energy meter.

The one list of objectives: the API validates a job's ``objective`` against it (api/schemas.py,
with :func:`check_objective`'s message), the worker asks it whether to meter a trial.

The meter (worker/measuring/energy.py) costs every trial it runs for about a second of GPU time
(windows of back-to-back launches from counter step to step), so only trials of jobs that rank by
energy pay it; a ``time`` job's trials record no energy. tuner/objective.py turns the objective into
the value strategies see.
"""

from __future__ import annotations

OBJECTIVES = ("time", "energy", "time+energy")
ENERGY_OBJECTIVES = frozenset({"energy", "time+energy"})
# The metric a trial of such a job carries instead of an energy reading, saying why there is none (no
# meter on the GPU or the backend, the meter gave up): the trial keeps its time but never ranks by energy.
ENERGY_MISSING = "energy_missing"


def check_objective(objective: str) -> str:
    """``objective`` itself when a job may minimize it.

    Raises:
        ValueError: it is none of :data:`OBJECTIVES` (the message names them).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}: a job minimizes one of {', '.join(OBJECTIVES)}")
    return objective


def measures_energy(objective: str) -> bool:
    """Whether trials of a job with ``objective`` must be metered for energy."""
    return objective in ENERGY_OBJECTIVES
