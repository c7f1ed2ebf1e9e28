"""Space-filling choice of configs: the initial design of model-based strategies.

Greedy maximin over a random subsample of the free candidates: each pick is the candidate
farthest (in feature space) from everything already observed, pending or picked. Observed points
include failed ones, so a first batch that hit a failing corner moves away from it.
"""

from __future__ import annotations

import numpy as np

SUBSAMPLE = 1024


def maximin(
    features: np.ndarray,
    free_rows: np.ndarray,
    placed_rows: np.ndarray,
    n: int,
    rng: np.random.Generator,
    banned: np.ndarray | None = None,
) -> list[int]:
    """Pick ``n`` rows of ``free_rows`` that spread out from ``placed_rows`` and each other.

    ``banned``: rows of ``free_rows`` never picked, though they stay in the subsample, so the
    random draws are those without them (the warm-start gate's hidden probe, bayes.py)."""
    if n <= 0 or len(free_rows) == 0:
        return []
    pool = free_rows if len(free_rows) <= SUBSAMPLE else rng.choice(free_rows, SUBSAMPLE, replace=False)
    pool = np.sort(pool)
    ok = np.ones(len(pool), dtype=bool) if banned is None else ~np.isin(pool, banned)
    x = features[pool]
    if len(placed_rows):
        placed = features[placed_rows]
        nearest = ((x[:, None, :] - placed[None, :, :]) ** 2).sum(-1).min(1)
    else:
        nearest = np.full(len(pool), np.inf)
    nearest[~ok] = -2.0
    chosen: list[int] = []
    for _ in range(min(n, int(ok.sum()))):
        if np.isinf(nearest[ok]).all():
            i = int(rng.integers(len(pool)))  # nothing placed yet: a random start
            i = i if ok[i] else int(np.flatnonzero(ok)[0])
        else:
            i = int(np.argmax(nearest + rng.random(len(pool)) * 1e-9))  # random tie-break
        chosen.append(int(pool[i]))
        nearest = np.minimum(nearest, ((x - x[i]) ** 2).sum(-1))
        nearest[i] = -1.0
    return chosen
