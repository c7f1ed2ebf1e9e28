"""What a job can minimize, and which of those objectives need the GPU's energy meter.

The meter (worker/measuring/energy.py) costs every trial it runs for about a second of GPU time
(windows of back-to-back launches from counter step to step), so only trials of jobs that rank by
energy pay it; a ``time`` job's trials record no energy. tuner/objective.py turns the objective into
the value strategies see.
"""

from __future__ import annotations

OBJECTIVES = ("time", "energy", "time+energy")
ENERGY_OBJECTIVES = frozenset({"energy", "time+energy"})


def measures_energy(objective: str) -> bool:
    """Whether trials of a job with ``objective`` must be metered for energy."""
    return objective in ENERGY_OBJECTIVES
