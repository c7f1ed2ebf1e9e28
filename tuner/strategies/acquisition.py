"""Acquisition functions over a candidate pool, from scikit-optimize.

scikit-optimize's ``gaussian_ei``/``gaussian_lcb`` take a fitted model with ``predict(X,
return_std=True)``. Our posterior over the pool is already computed (and updated as a batch is
built), so ``_PoolModel`` hands it over: ``X`` is the pool index. This module is the only place
that imports scikit-optimize.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from skopt.acquisition import gaussian_ei, gaussian_lcb, gaussian_pi

from kernelfarm.core.strategy_options.bayes import ACQUISITIONS


class _PoolModel:
    def __init__(self, mean: np.ndarray, std: np.ndarray) -> None:
        self.mean, self.std = mean, std

    def predict(self, x: np.ndarray, return_std: bool = False) -> Any:
        idx = x[:, 0].astype(np.int64)
        return (self.mean[idx], self.std[idx]) if return_std else self.mean[idx]


def acquisition(
    name: str, mean: np.ndarray, std: np.ndarray, best: float, xi: float = 0.0, kappa: float = 1.96
) -> np.ndarray:
    """Acquisition values (higher is better) of pool points with posterior ``mean``/``std`` of a
    quantity to minimize whose best observed value is ``best``."""
    model = _PoolModel(mean, std)
    x = np.arange(len(mean), dtype=np.float64)[:, None]
    if name == "ei":
        return np.asarray(gaussian_ei(x, model, y_opt=best, xi=xi))
    if name == "pi":
        return np.asarray(gaussian_pi(x, model, y_opt=best, xi=xi))
    if name == "lcb":
        return -np.asarray(gaussian_lcb(x, model, kappa=kappa))
    raise ValueError(f"unknown acquisition {name!r}; choose one of {ACQUISITIONS}")
