"""Target transforms shared by the model-based pieces: output warping, standardization, and the
deterministic "best quarter plus a random rest" subset that caps every model's size."""

from __future__ import annotations

import numpy as np
import scipy.stats


def warp(y: np.ndarray, name: str) -> np.ndarray:
    """Output warping of log times: "log" (none), "copula" (normal scores of the ranks), or
    "clip" (log times above the median + 2 IQR clipped: very slow configs stop dominating)."""
    if name == "copula":
        ranks = scipy.stats.rankdata(y)
        return np.asarray(scipy.stats.norm.ppf((ranks - 0.5) / len(y)))
    if name == "clip":
        q25, q50, q75 = np.quantile(y, [0.25, 0.5, 0.75])
        return np.minimum(y, q50 + 2 * (q75 - q25))
    return y


def standardize(y: np.ndarray) -> np.ndarray:
    sd = float(y.std())
    return (y - y.mean()) / (sd if sd > 1e-12 else 1.0)


def subset(size: int, limit: int, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Indices of at most ``limit`` items: the best (lowest ``y``) quarter plus a random rest."""
    if size <= limit:
        return np.arange(size)
    order = np.argsort(y, kind="stable")
    best = order[: limit // 4]
    rest = rng.choice(order[limit // 4 :], limit - len(best), replace=False)
    return np.sort(np.concatenate([best, rest]))
