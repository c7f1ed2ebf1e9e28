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

**Alignment columns** (appended after those, see :func:`alignment_columns`): integer parameters
whose values are not all powers of two (block sizes in steps of 16 or 32, tile sizes 1..8) get two
more columns, "is a power of two" and the exponent of the largest power of two dividing the value.
Why: on GPUs such a parameter's effect is mostly *alignment*, not magnitude (warps of 32 and
wavefronts of 64 threads, vector loads of 2 / 4 elements). On convolution_milo_W6600 the median
log time is 2.3 at block_size_x 16 / 32 / 64 / 128 / 256 and 4.1-4.9 at every value between, so on
the rank column alone that parameter looks like noise: the GP fitted a length scale of one step
(0.05-0.1 of the range) and its predictions over the space had a rank correlation of 0.17 with the
truth after 100 evaluations, i.e. no model (docs/benchmarks/STRATEGIES.md, issue 17's diagnosis).
With the alignment columns the same structure is one smooth direction the GP can learn.
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


def alignment_columns(parameter: Parameter) -> list[np.ndarray]:
    """Per value of an integer parameter whose values are not all powers of two: "is a power of
    two" and the 2-adic valuation (trailing zero bits), each scaled to [0, 1]; columns that are
    constant over the values are left out. Empty for any other parameter."""
    values = [v for v in parameter.values if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    if len(values) < 3 or len(values) < len(parameter.values) or parameter.power_of_two:
        return []
    power = np.array([float(v & (v - 1) == 0) for v in values])
    trailing = np.array([float((v & -v).bit_length() - 1) for v in values])
    return [(c - c.min()) / np.ptp(c) for c in (power, trailing) if np.ptp(c) > 0]


def encode(space: SearchSpace, indices: np.ndarray) -> tuple[np.ndarray, int]:
    """Features (n, D) of value-index rows (n, P) of ``space``, and how many of the D columns are
    the plain ones (the alignment columns come after them)."""
    columns: list[np.ndarray] = []
    aligned: list[np.ndarray] = []
    for j, parameter in enumerate(space.parameters):
        if len(parameter.values) < 2:
            continue
        positions = column_positions(parameter)
        if positions is not None:
            columns.append(positions[indices[:, j]])
            aligned.extend(c[indices[:, j]] for c in alignment_columns(parameter))
            continue
        one_hot = np.eye(len(parameter.values))[indices[:, j]] / math.sqrt(2.0)
        columns.extend(one_hot.T)
    plain = len(columns)
    columns += aligned
    if not columns:
        return np.zeros((len(indices), 0)), 0
    return np.ascontiguousarray(np.stack(columns, axis=1), dtype=np.float64), plain
