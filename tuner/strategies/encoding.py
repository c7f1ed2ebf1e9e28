"""Numeric features of configs for surrogate models: every column in [0, 1].

Kernel parameters are mostly ordered (block sizes, tile sizes, unroll factors) and often powers of
two, whose effect scales with the exponent rather than the value: 64 → 128 is as big a step as
8 → 16. So:

- power-of-two parameters (all values 2^k, more than two of them) are placed by log2(value);
- other numeric parameters by their rank among the sorted values (ordinal: evenly spaced lists
  stay linear, irregular ones such as 1, 2, 4, 8, 16, 32, 48, 64 get a log-like spacing);
- string parameters with more than two values are one-hot, scaled so that switching category is
  a distance of 1 like the full range of an ordered parameter;
- parameters with a single value carry no information and are dropped.
"""

from __future__ import annotations

import math

import numpy as np

from kernelfarm.core.space import Parameter, SearchSpace


def column_positions(parameter: Parameter) -> np.ndarray | None:
    """Position in [0, 1] of each value of an ordered parameter, or None for a categorical one."""
    values = parameter.values
    if len(values) < 2:
        return np.zeros(len(values))
    if parameter.power_of_two:
        logs = np.array([math.log2(float(v)) for v in values])
        return (logs - logs.min()) / (logs.max() - logs.min())
    if parameter.numeric:
        order = np.argsort(np.array(values, dtype=np.float64), kind="stable")
        ranks = np.empty(len(values))
        ranks[order] = np.arange(len(values))
        return ranks / (len(values) - 1)
    if len(values) == 2:
        return np.array([0.0, 1.0])
    return None


def encode(space: SearchSpace, indices: np.ndarray) -> np.ndarray:
    """Features (n, D) of value-index rows (n, P) of ``space``."""
    columns: list[np.ndarray] = []
    for j, parameter in enumerate(space.parameters):
        if len(parameter.values) < 2:
            continue
        positions = column_positions(parameter)
        if positions is not None:
            columns.append(positions[indices[:, j]])
            continue
        one_hot = np.eye(len(parameter.values))[indices[:, j]] / math.sqrt(2.0)
        columns.extend(one_hot.T)
    if not columns:
        return np.zeros((len(indices), 0))
    return np.ascontiguousarray(np.stack(columns, axis=1), dtype=np.float64)
