"""Alignment columns of the encoding (tuner/strategies/encoding.py): integer parameters whose values
are not all powers of two also get "is a power of two" and "power of two dividing the value"."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.space import Parameter, SearchSpace
from kernelfarm.tuner.strategies.base import Observation
from kernelfarm.tuner.strategies.bayes import BayesianOptimizer
from kernelfarm.tuner.strategies.candidates import candidate_table
from kernelfarm.tuner.strategies.encoding import alignment_columns
from kernelfarm.tuner.strategies.gp import GaussianProcess, fit_hyperparameters
from tests.tuner.conftest import CONTEXT, SPACE


def test_alignment_columns_mark_powers_of_two_and_the_power_of_two_dividing_each_value() -> None:
    power, trailing = alignment_columns(Parameter("bx", (16, 32, 48, 64, 80)))
    assert power.tolist() == [1.0, 1.0, 0.0, 1.0, 0.0]
    assert trailing.tolist() == [0.0, 0.5, 0.0, 1.0, 0.0]  # 2^4, 2^5, 2^4, 2^6, 2^4
    assert alignment_columns(Parameter("p", (1, 2, 4, 8))) == []  # powers of two: already on log2
    assert alignment_columns(Parameter("s", ("a", "b", "c"))) == []
    assert alignment_columns(Parameter("f", (0.5, 1.5, 3.0))) == []
    assert alignment_columns(Parameter("two", (3, 4))) == []
    power, trailing = alignment_columns(Parameter("odd", (1, 3, 6)))
    assert power.tolist() == [1.0, 0.0, 0.0] and trailing.tolist() == [0.0, 0.0, 1.0]
    assert alignment_columns(Parameter("odd", (3, 5, 7))) == []  # both columns constant: left out


def test_alignment_columns_come_after_the_plain_ones() -> None:
    table = candidate_table(SPACE, CONTEXT)
    # SPACE's "tile" (1, 2, 3, 5, 8) is the only integer parameter that is not all powers of two
    assert table.features.shape[1] == table.plain_columns + 2
    tile = np.array([SPACE.config_at(i)["tile"] for i in table.indices])
    assert np.array_equal(table.features[:, table.plain_columns], np.isin(tile, (1, 2, 8)).astype(float))
    plain = table.model_features(False)
    assert plain.shape[1] == table.plain_columns and np.shares_memory(plain, table.features)
    assert table.model_features(True) is table.features


def test_a_power_of_two_effect_is_learned_with_alignment_columns_and_not_without() -> None:
    """The cause found on convolution_milo: fast at block sizes 16/32/64/128/256, slow between.
    On the rank column alone that is noise to a GP; with the alignment columns it is one feature."""
    space = SearchSpace(
        parameters=(
            Parameter("bx", tuple(range(16, 257, 16))),
            Parameter("by", (1, 2, 4, 8, 16)),
            Parameter("t", (1, 2, 3, 4)),
            Parameter("s", (0, 1)),
        ),
    )
    table = candidate_table(space)
    configs = [space.config_at(i) for i in table.indices]
    bx, by, t, s = (np.array([c[k] for c in configs]) for k in ("bx", "by", "t", "s"))
    log_time = np.where((bx & (bx - 1)) == 0, 0.0, 2.0) + 0.3 * np.abs(np.log2(by) - 2) + 0.2 * t + 0.5 * s
    for seed in range(3):
        train = np.random.default_rng(seed).choice(len(table), 30, replace=False)
        rest = np.setdiff1d(np.arange(len(table)), train)
        y = (log_time[train] - log_time[train].mean()) / log_time[train].std()
        quality = {}
        for aligned in (True, False):
            x = table.model_features(aligned)
            gp = GaussianProcess(x[train], y, fit_hyperparameters(x[train], y))
            quality[aligned] = spearmanr(gp.mean(x[rest]), log_time[rest]).statistic
        assert quality[True] > 0.9 and quality[False] < 0.8  # measured: 0.99-1.0 with, 0.42-0.67 without


def test_bayes_flags_take_booleans_and_numbers_do_not() -> None:
    for good in ({"transfer": False}, {"alignment": False, "design_alignment": True}):
        assert BayesianOptimizer.from_history(SPACE, CONTEXT, [], 0, good).ask(1)
    for bad in ({"alignment": 1}, {"n_init": True}, {"gate_nulls": -1}, {"gate_nulls": 1}, {"gate_nulls": 65},
                {"alignment_length": -1.0}):  # fmt: skip
        with pytest.raises(InvalidInput):
            BayesianOptimizer.from_history(SPACE, CONTEXT, [], 0, bad)


def test_a_long_length_prior_keeps_an_irrelevant_column_out_of_a_small_fit() -> None:
    """``alignment_length``: ten points, one relevant feature and one that carries nothing. With
    the prior mean moved to a long length scale the irrelevant feature's fitted length grows."""
    rng = np.random.default_rng(1)
    x = rng.random((10, 2))
    y = np.sin(3 * x[:, 0])
    y = (y - y.mean()) / y.std()
    plain = fit_hyperparameters(x, y)
    long = fit_hyperparameters(x, y, length_prior=np.log(np.array([0.5, 4.0])))
    assert long.lengths[1] > plain.lengths[1]
    assert long.lengths[1] > 1.0


def test_bayes_passes_the_alignment_length_prior_only_to_alignment_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelfarm.tuner.strategies import bayes

    seen: list[np.ndarray | None] = []
    real = bayes.fit_hyperparameters

    def spy(x: np.ndarray, y: np.ndarray, maxiter: int = 60, length_prior: np.ndarray | None = None) -> object:
        seen.append(length_prior)
        return real(x, y, maxiter, length_prior)

    monkeypatch.setattr(bayes, "fit_hyperparameters", spy)
    history = [Observation(c, float(c["tile"]) + c["bx"]) for c in SPACE.valid_configs(CONTEXT)[:12]]
    BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {"alignment": True, "alignment_length": 2.0}).ask(1)
    table = candidate_table(SPACE, CONTEXT)
    prior = seen[-1]
    assert prior is not None and len(prior) == table.features.shape[1]
    assert np.allclose(prior[table.plain_columns :], np.log(2.0))
    assert np.allclose(prior[: table.plain_columns], np.log(0.5))
    BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {"alignment": True}).ask(1)
    assert seen[-1] is None  # alignment_length 0: one prior for every feature
    BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {"alignment_length": 2.0}).ask(1)
    assert seen[-1] is None  # the default encoding has no alignment columns
