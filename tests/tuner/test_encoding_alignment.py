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
from kernelfarm.tuner.strategies.gp import GaussianProcess, fit_hyperparameters, loo_log_predictive
from tests.configs import integer
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

    def spy(
        x: np.ndarray, y: np.ndarray, maxiter: int = 60, length_prior: np.ndarray | None = None, start: object = None
    ) -> object:
        seen.append(length_prior)
        return real(x, y, maxiter, length_prior, start)  # type: ignore[arg-type]

    monkeypatch.setattr(bayes, "fit_hyperparameters", spy)
    history = [Observation(c, float(c["tile"]) + float(c["bx"])) for c in SPACE.valid_configs(CONTEXT)[:12]]
    BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {"alignment": True, "alignment_length": 2.0}).ask(1)
    table = candidate_table(SPACE, CONTEXT)
    prior = seen[-1]
    assert prior is not None and len(prior) == table.features.shape[1]
    assert np.allclose(prior[table.plain_columns :], np.log(2.0))
    assert np.allclose(prior[: table.plain_columns], np.log(0.5))
    BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {"alignment": True, "alignment_length": 0.0}).ask(1)
    assert seen[-1] is None  # alignment_length 0: one prior for every feature
    seen.clear()
    options = {"alignment_length": 2.0, "alignment_select": False}
    BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, options).ask(1)
    assert seen and all(p is None for p in seen)  # the plain encoding has no alignment columns
    seen.clear()
    BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {"alignment_select": True, "alignment_length": 2.0}).ask(
        1
    )
    full = [p for p in seen if p is not None]
    assert len(full) == 1 and np.allclose(full[0][table.plain_columns :], np.log(2.0))


def test_the_closed_form_leave_one_out_density_is_the_refit_without_each_point() -> None:
    rng = np.random.default_rng(0)
    x = rng.random((12, 3))
    y = np.sin(4 * x[:, 0]) + 0.3 * x[:, 1] + 0.05 * rng.standard_normal(12)
    y = (y - y.mean()) / y.std()
    hp = fit_hyperparameters(x, y)
    expected = 0.0
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        posterior = GaussianProcess(x[keep], y[keep], hp).pool(x[i : i + 1])
        var = float(posterior.var[0]) + hp.noise  # the left-out target is noisy like the others
        expected += -0.5 * np.log(2 * np.pi * var) - 0.5 * (y[i] - float(posterior.mean[0])) ** 2 / var
    # (the pool posterior uses the fast covariance: agreement to ~1e-5, not to rounding)
    assert loo_log_predictive(x, y, hp) == pytest.approx(expected, rel=1e-4)


def _aligned_space_history(power_of_two_matters: bool, n: int = 30) -> tuple[SearchSpace, list[Observation]]:
    space = SearchSpace(
        parameters=(
            Parameter("bx", tuple(range(16, 257, 16))),
            Parameter("by", (1, 2, 4, 8, 16)),
            Parameter("t", (1, 2, 3, 4)),
        ),
    )
    table = candidate_table(space)
    rows = np.random.default_rng(1).choice(len(table), n, replace=False)
    history = []
    for row in rows.tolist():
        c = space.config_at(table.indices[row])
        bx, by, t = (integer(c, k) for k in ("bx", "by", "t"))
        aligned = bx & (bx - 1) == 0
        step = (0.0 if aligned else 2.0) if power_of_two_matters else 0.01 * bx
        history.append(Observation(c, float(np.exp(step + 0.3 * abs(np.log2(by) - 2) + 0.2 * t))))
    return space, history


def test_alignment_select_uses_the_columns_where_alignment_matters_and_not_where_the_time_is_smooth() -> None:
    # the common length prior for every column, so that the choice is the comparison's alone
    options = {"alignment_select": True, "alignment_length": 0.0}
    for matters in (True, False):
        space, history = _aligned_space_history(matters)
        optimizer = BayesianOptimizer.from_history(space, {}, history, 0, options)
        assert optimizer.ask(1)
        assert optimizer.alignment_selected is matters
        off = BayesianOptimizer.from_history(space, {}, history, 0, {"alignment_select": False})
        assert off.ask(1) and off.alignment_selected is False  # switched off: never selected
    space, history = _aligned_space_history(True)
    # on by default, with the long length prior: the leave-one-family-out choice (issue 17, seventh session)
    default = BayesianOptimizer.from_history(space, {}, history, 0)
    assert default.ask(1) and default.alignment_selected is True
    refit = {"alignment_select": True, "alignment_length": 2.0, "select_plain_steps": -1}
    chosen = BayesianOptimizer.from_history(space, {}, history, 0, refit)
    assert chosen.ask(1) and chosen.alignment_selected is True  # the fifth session's rule agrees


def test_alignment_select_changes_nothing_where_the_space_has_no_alignment_columns() -> None:
    space = SearchSpace(parameters=(Parameter("bx", (16, 32, 64, 128)), Parameter("by", (1, 2, 4, 8))))
    history = [
        Observation(c, integer(c, "bx") / integer(c, "by") + integer(c, "by")) for c in space.valid_configs()[::3]
    ]
    plain = BayesianOptimizer.from_history(space, {}, history, 0, {"alignment_select": False}).ask(2)
    selecting = BayesianOptimizer.from_history(space, {}, history, 0, {"alignment_select": True})
    assert selecting.ask(2) == plain and selecting.alignment_selected is False
