"""The standardized score: its random baseline is exact, and the score's anchors are 0 and 1."""

from __future__ import annotations

import itertools
import statistics

import numpy as np
import pytest

from kernelfarm.tuner.strategy_benchmark.standardized import random_baseline, standardized_score


def test_random_baseline_is_the_exact_expected_minimum() -> None:
    times = [3.0, 1.0, None, 2.0, 5.0]  # the failing config counts as the slowest (5.0)
    base = random_baseline(times, 5)
    filled = [3.0, 1.0, 5.0, 2.0, 5.0]
    for b in range(1, 6):
        exact = statistics.fmean(min(c) for c in itertools.combinations(filled, b))
        assert base[b - 1] == pytest.approx(exact)


def test_score_is_one_at_the_optimum_and_zero_for_random_like_runs() -> None:
    times = [float(t) for t in range(1, 101)]
    base = random_baseline(times, 20)
    assert standardized_score([[1.0] * 20], base, 1.0, 100.0) == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    runs = [list(rng.permutation(times)[:20]) for _ in range(4000)]
    assert abs(standardized_score(runs, base, 1.0, 100.0)) < 0.03
    assert standardized_score([[100.0] * 20], base, 1.0, 100.0) < 0  # worse than random search
