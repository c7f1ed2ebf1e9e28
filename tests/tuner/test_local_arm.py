"""The local arm of ``bayes`` (tuner/strategies/local.py): once the incumbent stops improving,
some proposals go to its untried one-parameter neighbours; the quota is rebuilt from history."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.space import Config, Parameter, SearchSpace
from kernelfarm.tuner.strategies import bayes
from kernelfarm.tuner.strategies.base import Observation
from kernelfarm.tuner.strategies.bayes import BayesianOptimizer
from kernelfarm.tuner.strategies.candidates import candidate_table, switch_pairs
from kernelfarm.tuner.strategies.gp import Hyperparameters
from kernelfarm.tuner.strategies.local import incumbent_index, local_steps_due, pair_moves, plateau_start
from kernelfarm.tuner.strategies.observed import table_rows
from tests.tuner.conftest import CONTEXT, SPACE

GRID = SearchSpace(parameters=(Parameter("a", tuple(range(12))), Parameter("b", tuple(range(12)))))
BEST: Config = {"a": 3, "b": 4}


def _neighbour(config: Config, other: Config) -> bool:
    return sum(config[k] != other[k] for k in config) == 1


def _stalled_history(stalled: int) -> list[Observation]:
    """The incumbent BEST, measured fourth, then ``stalled`` slower configs none of which is its
    neighbour (the far corner of the grid, where the model has nothing to learn about BEST's)."""
    start = [Observation({"a": 0, "b": 0}, 9.0), Observation({"a": 11, "b": 11}, 8.0)]
    start.append(Observation({"a": 6, "b": 6}, 5.0))
    far: list[Config] = [{"a": a, "b": b} for a in range(7, 12) for b in range(7, 12)]
    slower = [Observation(c, 6.0 + 0.01 * i) for i, c in enumerate(far[:stalled])]
    return [*start, Observation(BEST, 1.0), *slower]


def _due(history: list[Observation], after: int, every: int, tolerance: float = 0.0) -> int:
    table = candidate_table(GRID, {})
    return local_steps_due(table, history, table_rows(table, GRID, history), after, every, tolerance)[0]


def test_the_incumbent_is_the_first_fastest_measured_trial() -> None:
    history = [Observation(BEST, None, pending=True), Observation({"a": 1, "b": 1}, 2.0),
               Observation({"a": 2, "b": 2}, 2.0), Observation({"a": 5, "b": 5}, None)]  # fmt: skip
    assert incumbent_index(history) == 1
    assert incumbent_index([Observation(BEST, None, pending=True)]) is None


def test_steps_fall_due_after_the_stall_then_one_per_period_less_those_taken() -> None:
    assert _due(_stalled_history(9), after=10, every=2) == 0
    assert _due(_stalled_history(10), after=10, every=2) == 1
    assert _due(_stalled_history(13), after=10, every=2) == 2  # stalls 10 and 12
    assert _due(_stalled_history(20), after=0, every=2) == 0  # off
    # a neighbour of the incumbent measured (or pending) since counts as a step taken, whoever proposed it
    taken = [*_stalled_history(13), Observation({"a": 3, "b": 9}, None, pending=True)]
    assert _due(taken, after=10, every=2) == 1
    # a pending trial is not an evaluation without improvement yet
    assert _due([*_stalled_history(9), Observation({"a": 11, "b": 0}, None, pending=True)], after=10, every=2) == 0


def _creeping_history(stalled: int) -> list[Observation]:
    """A plateau: a config at 1.005 measured fourth, ``stalled`` slower ones, then BEST at 1.0 (a
    gain of half a percent), then two more slower ones."""
    history = _stalled_history(stalled)
    history[3] = Observation({"a": 6, "b": 7}, 1.005)
    return [*history, Observation(BEST, 1.0), Observation({"a": 0, "b": 11}, 7.0), Observation({"a": 11, "b": 0}, 7.0)]


def test_a_gain_below_the_tolerance_does_not_end_the_stall() -> None:
    history = _creeping_history(10)
    assert plateau_start(history, 14, 0.0) == 14
    assert plateau_start(history, 14, 0.01) == 3  # within 1 % of BEST since the fourth trial
    assert plateau_start(history, 14, 0.001) == 14
    # any gain ends the stall: 2 evaluations since BEST; within 1 %: 13 since the plateau began
    assert _due(history, after=10, every=2) == 0
    assert _due(history, after=10, every=2, tolerance=0.01) == 2
    assert _due(history, after=10, every=2, tolerance=0.004) == 0  # the gain (0.5 %) is above it
    proposed = BayesianOptimizer.from_history(
        GRID, {}, history, 0, {"local_after": 10, "local_every": 2, "local_tolerance": 0.01}
    ).ask(1)
    assert _neighbour(proposed[0], BEST)  # the neighbours are the incumbent's, not the plateau's first
    model = BayesianOptimizer.from_history(GRID, {}, history, 0, {"local_after": 10, "local_every": 2}).ask(1)
    assert not _neighbour(model[0], BEST)


def test_a_stalled_job_proposes_the_incumbents_neighbour_the_model_likes_best() -> None:
    history = _stalled_history(20)
    options = {"local_after": 20, "local_every": 2}
    proposed = BayesianOptimizer.from_history(GRID, {}, history, 0, options).ask(1)
    assert _neighbour(proposed[0], BEST)
    # with the arm off, or its quota spent, the proposal is the model's own
    off = BayesianOptimizer.from_history(GRID, {}, history, 0, {"local_after": 0}).ask(1)
    assert not _neighbour(off[0], BEST)
    spent = [*history, Observation(proposed[0], 7.0)]
    model = BayesianOptimizer.from_history(GRID, {}, spent, 0, {"local_after": 0}).ask(1)
    assert BayesianOptimizer.from_history(GRID, {}, spent, 0, options).ask(1) == model


def test_the_arm_leaves_a_batch_to_the_model_but_for_the_steps_due() -> None:
    history = _stalled_history(22)  # two steps due
    batch = BayesianOptimizer.from_history(GRID, {}, history, 0, {"local_after": 20, "local_every": 2}).ask(4)
    assert [_neighbour(c, BEST) for c in batch[:2]] == [True, True]
    assert len({tuple(sorted(c.items())) for c in batch}) == 4


def test_local_options_are_checked() -> None:
    for bad in ({"local_every": 0}, {"local_after": -1}, {"select_plain_steps": -2}, {"local_after": 1.5},
                {"local_tolerance": -0.01}, {"local_tolerance": 1.5}, {"local_tolerance": float("nan")},
                {"local_tolerance": "0.01"}, {"local_tolerance": True}):  # fmt: skip
        with pytest.raises(InvalidInput):
            BayesianOptimizer.from_history(SPACE, CONTEXT, [], 0, bad)


@pytest.mark.parametrize(("steps", "plain_fit"), [(0, None), (5, "refined"), (-1, "own")])
def test_the_plain_model_is_the_full_fit_restricted_refined_or_fitted_apart(
    monkeypatch: pytest.MonkeyPatch, steps: int, plain_fit: str | None
) -> None:
    """``select_plain_steps``: the alignment choice's plain model costs no fit (0), a few steps
    from the full fit's answer (n), or a fit of its own (-1: issue 17's fifth session)."""
    fits: list[tuple[int, int, Hyperparameters | None]] = []
    real = bayes.fit_hyperparameters

    def counting(
        x: np.ndarray,
        y: np.ndarray,
        maxiter: int = 60,
        length_prior: np.ndarray | None = None,
        start: Hyperparameters | None = None,
    ) -> Hyperparameters:
        hp = real(x, y, maxiter, length_prior, start)
        fits.append((x.shape[1], maxiter, start))
        return hp

    monkeypatch.setattr(bayes, "fit_hyperparameters", counting)
    table = candidate_table(SPACE, CONTEXT)
    configs = [SPACE.config_at(i) for i in table.indices[::4]]
    history = [Observation(c, 1.0 + 0.1 * i) for i, c in enumerate(configs[:14])]
    BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {"select_plain_steps": steps}).ask(1)
    full, plain = table.features.shape[1], table.plain_columns
    # every trial succeeded: no feasibility model, so these are the objective model's fits only
    expected = {None: [(full, 60, False)], "refined": [(full, 60, False), (plain, steps, True)],
                "own": [(full, 60, False), (plain, 60, False)]}[plain_fit]  # fmt: skip
    assert [(dims, maxiter, start is not None) for dims, maxiter, start in fits] == expected
    if plain_fit == "refined":  # from the full fit's answer, restricted to the plain columns
        assert fits[1][2] is not None and len(fits[1][2].lengths) == plain


def _every_config(space: SearchSpace) -> list[Config]:
    return [dict(zip([p.name for p in space.parameters], v, strict=True))
            for v in itertools.product(*(p.values for p in space.parameters))]  # fmt: skip


def _hops(config: Config, other: Config) -> int:
    return sum(config[k] != other[k] for k in config)


def test_pool_hops_puts_the_incumbents_two_parameter_moves_in_a_capped_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    space = SearchSpace(parameters=tuple(Parameter(name, tuple(range(8))) for name in "abcd"))  # 4096 configs
    best: Config = {"a": 3, "b": 3, "c": 3, "d": 3}
    every = _every_config(space)
    slower = [Observation(every[i], 2.0 + 0.01 * k) for k, i in enumerate(range(7, 4096, 97))]
    history = [Observation(best, 1.0), *slower]
    pools: list[np.ndarray] = []
    real = BayesianOptimizer._pool

    def recording(self: BayesianOptimizer, *args: Any, **kwargs: Any) -> np.ndarray:
        pools.append(real(self, *args, **kwargs))
        return pools[-1]

    monkeypatch.setattr(BayesianOptimizer, "_pool", recording)
    table = candidate_table(space, {})
    counts = []
    # 43 evaluations since the incumbent: pool_hops_after 43 adds the ring, 44 not yet
    for options in ({"pool_hops": 1}, {"pool_hops": 2}, {"pool_hops": 2, "pool_hops_after": 43},
                    {"pool_hops": 2, "pool_hops_after": 44}):  # fmt: skip
        BayesianOptimizer.from_history(space, {}, history, 0, {"pool": 200, **options}).ask(1)
        configs = [space.config_at(i) for i in table.indices[pools[-1]]]
        assert len(configs) <= 200
        counts.append(sum(_hops(c, best) == 2 for c in configs))
    # of its 294 two-parameter neighbours: a quarter of the pool (50) with the ring; without, only
    # what the random sample brings (about 4 expected: 50 draws from ~3,800)
    assert counts[1] >= 50 and counts[2] >= 50 and counts[0] < 20 and counts[3] < 20, counts


def test_hop_options_are_checked() -> None:
    for bad in ({"pool_hops": 0}, {"pool_hops": 3}, {"pool_hops": True}, {"pool_hops_after": -1}):
        with pytest.raises(InvalidInput):
            BayesianOptimizer.from_history(SPACE, CONTEXT, [], 0, bad)


SWITCHES = SearchSpace(parameters=(Parameter("x", tuple(range(50))), Parameter("s", (0, 1)),
                                   Parameter("t", (0, 1)), Parameter("u", ("off", "on"))))  # fmt: skip


def test_switch_pairs_flip_two_two_valued_parameters_at_once() -> None:
    table = candidate_table(SWITCHES, {})
    start: Config = {"x": 7, "s": 1, "t": 0, "u": "on"}
    rows = table_rows(table, SWITCHES, [Observation(start, 1.0)])
    moved = [SWITCHES.config_at(table.indices[r]) for r in switch_pairs(table, rows)]
    assert sorted(tuple(c.values()) for c in moved) == [(7, 0, 0, "off"), (7, 0, 1, "on"), (7, 1, 1, "off")]
    assert len(switch_pairs(candidate_table(GRID, {}), np.array([0]))) == 0  # no two-valued parameters


def test_with_tried_rows_a_pair_waits_until_both_its_single_flips_are_tried() -> None:
    table = candidate_table(SWITCHES, {})
    start: Config = {"x": 7, "s": 1, "t": 0, "u": "on"}
    flips = [{**start, "s": 0}, {**start, "t": 1}]  # u's flip not tried
    rows = table_rows(table, SWITCHES, [Observation(start, 1.0)])
    tried = table_rows(table, SWITCHES, [Observation(c, 2.0) for c in flips])
    moved = [SWITCHES.config_at(table.indices[r]) for r in switch_pairs(table, rows, tried)]
    assert [tuple(c.values()) for c in moved] == [(7, 0, 1, "on")]  # (s, t) only
    assert len(switch_pairs(table, rows, tried[:0])) == 0


def test_local_pairs_crosses_a_two_switch_cliff_the_one_step_moves_cannot() -> None:
    """The incumbent's one-parameter neighbours are all measured (each slower: one switch alone is
    a cliff) and 20 evaluations pass: with ``local_pairs`` the arm's step is both switches flipped,
    also from a pool too small to hold it by chance."""
    best: Config = {"x": 10, "s": 1, "t": 1, "u": "on"}
    table = candidate_table(SWITCHES, {})
    every = [SWITCHES.config_at(i) for i in table.indices]
    one_step = [c for c in every if _hops(c, best) == 1]
    far = [c for c in every if _hops(c, best) == 4][:20]
    history = [Observation(c, 5.0 + 0.01 * i) for i, c in enumerate(one_step)]
    history += [Observation(best, 1.0), *(Observation(c, 9.0) for c in far)]
    options = {"local_after": 20, "local_every": 2, "pool": 20}
    proposed = BayesianOptimizer.from_history(SWITCHES, {}, history, 0, {**options, "local_pairs": True}).ask(1)
    assert _hops(proposed[0], best) == 2 and proposed[0]["x"] == 10
    rows = table_rows(table, SWITCHES, history)
    due, near = local_steps_due(table, history, rows, 20, 2)
    due_pairs, near_pairs = local_steps_due(table, history, rows, 20, 2, pairs=True)
    assert due == due_pairs == 1
    assert len(near_pairs) == len(near) + 3  # the three two-switch moves of (s, t, u)


def test_with_cliff_a_pending_single_flip_does_not_count_as_tried() -> None:
    """``local_pairs_cliff``: the arm's two-switch moves are those whose single flips are both
    measured; a single flip still pending does not count as tried."""
    best: Config = {"x": 10, "s": 1, "t": 1, "u": "on"}
    table = candidate_table(SWITCHES, {})
    s_flip, t_flip, u_flip = ({**best, k: v} for k, v in (("s", 0), ("t", 0), ("u", "off")))
    history = [Observation(best, 1.0), Observation(s_flip, 5.0), Observation(t_flip, 5.0)]
    history.append(Observation(u_flip, None, pending=True))
    rows = table_rows(table, SWITCHES, history)
    moves = [SWITCHES.config_at(table.indices[r]) for r in pair_moves(table, history, rows, 0, cliff=True)]
    assert [(c["s"], c["t"], c["u"]) for c in moves] == [(0, 0, "on")]
    assert len(pair_moves(table, history, rows, 0, cliff=False)) == 3
