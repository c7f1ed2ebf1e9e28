"""What a job minimizes, as the one number per trial that strategies see.

``time`` is the trial's median time. ``energy`` is its energy per launch (NVML, recorded by cuda
workers in ``metrics["energy_mj"]``); a finished trial without it (a worker whose GPU has no energy
counter) cannot be ranked and counts as failed. ``time+energy`` wants the Pareto front of both:
each coordinator step scalarizes them with a different weight (ParEGO's augmented Chebyshev
function of the two log values, each scaled to [0, 1] over the job's trials), so successive
proposals aim at different points of the front; /v1/best?objective=pareto reports the front.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

RHO = 0.05  # ParEGO's augmentation: breaks ties along the front's flat parts


def scalarize(
    times: Sequence[float | None], energies: Sequence[float | None], objective: str, step_seed: Sequence[int]
) -> list[float | None]:
    """The value each trial gets under ``objective`` (None: no usable value)."""
    if objective == "time":
        return list(times)
    if objective == "energy":
        return [e if e is not None and e > 0 else None for e in energies]
    both = [(t, e) for t, e in zip(times, energies, strict=True) if t and e and t > 0 and e > 0]
    if not both:
        return [None] * len(times)
    lt = np.log([t for t, _ in both])
    le = np.log([e for _, e in both])
    weight = float(np.random.default_rng(list(step_seed)).random())

    def scaled(value: float, values: np.ndarray) -> float:
        span = float(values.max() - values.min())
        return (value - float(values.min())) / span if span > 0 else 0.0

    out: list[float | None] = []
    for t, e in zip(times, energies, strict=True):
        if not (t and e and t > 0 and e > 0):
            out.append(None)
            continue
        a, b = weight * scaled(math.log(t), lt), (1 - weight) * scaled(math.log(e), le)
        out.append(math.exp(max(a, b) + RHO * (a + b)))  # positive: strategies take logs
    return out
