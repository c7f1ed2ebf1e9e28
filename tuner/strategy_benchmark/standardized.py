"""The standardized score of Kernel Tuner's autotuning methodology (Willemsen et al., "A
methodology for comparing optimization algorithms for auto-tuning", 2024): at each number of
evaluations b, how far a strategy's mean best-so-far time is from random search's towards the
optimum, ``(random(b) - strategy(b)) / (random(b) - optimum)`` (0 = random search, 1 = the
optimum, negative = worse than random), averaged over b = 1..budget.

The average is weighted by ``random(b) - optimum`` (equivalently: the area between random
search's curve and the strategy's over the area between random search's and the optimum). An
unweighted mean is dominated by the evaluations where random search is already within a hair of
the optimum (dedispersion: 42 % of its configs are within 0.95): there a strategy 1 % behind
scored -20 on the unweighted mean while being at 0.99 of the optimum.

random(b) is not simulated: it is the exact expectation of the best of b configs drawn without
replacement from the space (every config of the space, failing ones included when failures
are kept). Before a run's first success its best-so-far counts as the slowest recorded time,
for the strategies and for random search alike.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import gammaln


def random_baseline(times: Sequence[float | None], budget: int) -> np.ndarray:
    """Expected best-so-far time of random search after 1..budget evaluations.

    ``times``: one entry per config of the space (None = fails)."""
    worst = max(t for t in times if t is not None)
    values = np.sort(np.array([worst if t is None else t for t in times], dtype=np.float64))
    n = len(values)
    out = np.empty(budget)
    i = np.arange(1, n + 1)  # P(min >= v_i) = C(n - i + 1, b) / C(n, b)
    for b in range(1, budget + 1):
        if b >= n:
            out[b - 1] = values[0]
            continue
        k = n - i + 1
        with np.errstate(invalid="ignore"):
            log_s = np.where(k >= b, gammaln(k + 1) - gammaln(b + 1) - gammaln(k - b + 1), -np.inf)
        log_s -= gammaln(n + 1) - gammaln(b + 1) - gammaln(n - b + 1)
        survive = np.exp(log_s)
        p_min = survive - np.append(survive[1:], 0.0)
        out[b - 1] = float(p_min @ values)
    return out


def best_so_far(trace: Sequence[float | None], budget: int, worst: float) -> np.ndarray:
    out = np.empty(budget)
    best = worst
    for b in range(budget):
        value = trace[b] if b < len(trace) else None
        if value is not None:
            best = min(best, value)
        out[b] = best
    return out


def standardized_score(
    traces: Sequence[Sequence[float | None]], baseline: np.ndarray, optimum: float, worst: float
) -> float:
    """Sum over b of (random(b) - mean strategy(b)) over the sum of (random(b) - optimum)."""
    budget = len(baseline)
    mean = np.mean([best_so_far(t, budget, worst) for t in traces], axis=0)
    gap = float(np.sum(baseline - optimum))
    if gap <= 1e-15:  # random search is at the optimum from the first evaluation: nothing to gain
        return 1.0
    return float(np.sum(baseline - mean) / gap)
