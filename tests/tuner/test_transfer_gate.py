"""The warm-start gate (tuner/strategies/transfer.py): a prior whose ranking of the job's own
measured configs disagrees is dropped, and the job goes on as a cold one; one that agrees stays."""

from __future__ import annotations

import itertools

import numpy as np

from kernelfarm.core.states import FailureKind
from kernelfarm.tuner.history import describe_prior
from kernelfarm.tuner.strategies.base import Observation
from kernelfarm.tuner.strategies.bayes import BayesianOptimizer
from kernelfarm.tuner.strategies.transfer import first_successes, prefix_agreement, rank_agreement
from tests.tuner.conftest import CONTEXT, SPACE, objective


def test_rank_agreement_is_in_standard_errors() -> None:
    x = np.arange(10.0)
    assert rank_agreement(x, 2 * x + 1) > 3  # perfect agreement, 10 points: tau 1 is ~4 standard errors
    assert rank_agreement(x, -x) < -3
    assert rank_agreement(x[:2], x[:2]) == 0.0  # too few points to say anything
    assert rank_agreement(x, np.ones(10)) == 0.0


def test_prefix_agreement_has_the_sign_of_each_prefixs_tau() -> None:
    rng = np.random.default_rng(3)
    prior, target = rng.standard_normal(12), rng.standard_normal(12)
    got = prefix_agreement(prior, target, 4)
    assert len(got) == 9
    for k, value in zip(range(4, 13), got, strict=True):
        assert np.sign(value) == np.sign(rank_agreement(prior[:k], target[:k]))
    assert prefix_agreement(prior[:3], target[:3], 4).size == 0


def test_first_successes_keeps_the_order_proposed_and_skips_failures() -> None:
    configs = SPACE.valid_configs(CONTEXT)[:5]
    history = [
        Observation(configs[3], 2.0),
        Observation(configs[1], None, FailureKind.COMPILE),
        Observation(configs[3], 1.0),  # a retried config counts once, at its first measurement
        Observation(configs[2], 4.0),
    ]
    rows, logs = first_successes(history, np.array([3, 1, 3, 2]), limit=5)
    assert rows.tolist() == [3, 2]
    assert np.allclose(logs, np.log([2.0, 4.0]))
    assert first_successes(history, np.array([3, 1, 3, 2]), limit=1)[0].tolist() == [3]


def test_first_successes_only_grow_at_their_end_when_trials_finish_out_of_order() -> None:
    """Parallel workers: trial 1 finishes after trials 2-4. Every list the gate saw before must be
    a prefix of every later one, or a verdict on a prefix could flip as trials finish."""
    configs = SPACE.valid_configs(CONTEXT)[:5]
    rows = np.arange(5)
    times = [1.0, 5.0, 2.0, 4.0, 3.0]
    finish_order = [0, 2, 3, 4, 1]
    done: set[int] = set()
    seen_lists: list[list[int]] = []
    for finished in finish_order:
        done.add(finished)
        history = [Observation(configs[i], times[i] if i in done else None, pending=i not in done) for i in range(5)]
        seen_lists.append(first_successes(history, rows, limit=5)[0].tolist())
    for earlier, later in itertools.pairwise(seen_lists):
        assert later[: len(earlier)] == earlier
    assert seen_lists[1] == [0]  # trial 1 pending: trial 2 waits behind it
    assert seen_lists[-1] == [0, 1, 2, 3, 4]


def _history_and_priors() -> tuple[list[Observation], list[Observation], list[Observation]]:
    valid = [c for c in SPACE.valid_configs(CONTEXT) if objective(c) is not None]
    rng = np.random.default_rng(0)
    picked = [valid[i] for i in rng.choice(len(valid), 60, replace=False)]
    history = [Observation(c, objective(c)) for c in picked[:8]]
    # Another GPU, timed 3x slower but ranked alike: a related prior; the same times reversed: a misleading one.
    related = [Observation(c, 3 * (objective(c) or 0.0), source="other") for c in picked[8:]]
    worst = max(objective(c) or 0.0 for c in picked)
    reversed_ = [Observation(c, worst + 1 - (objective(c) or 0.0), source="other") for c in picked[8:]]
    return history, related, reversed_


def test_a_prior_that_ranks_the_jobs_configs_alike_is_kept() -> None:
    history, related, _ = _history_and_priors()
    optimizer = BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {}, prior=related)
    assert optimizer.ask(2)
    assert not optimizer.prior_dropped


def test_a_misleading_prior_is_dropped_and_the_job_continues_cold() -> None:
    history, _, reversed_ = _history_and_priors()
    warm = BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {}, prior=reversed_)
    cold = BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {})
    proposed = warm.ask(2)
    assert warm.prior_dropped
    assert describe_prior(reversed_, warm.prior_dropped).endswith("unlike its own times)")  # the job's status
    assert proposed == cold.ask(2)  # the design topped up to the cold size, the cold model: the cold job's picks
    # a negative gate: no gate, the prior kept whatever it says (the behaviour before the gate)
    kept = BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {"transfer_gate": -1.0}, prior=reversed_)
    assert kept.ask(2) != proposed
    assert not kept.prior_dropped


def test_before_the_gate_the_prior_is_trusted() -> None:
    history, _, reversed_ = _history_and_priors()
    optimizer = BayesianOptimizer.from_history(SPACE, CONTEXT, history[:3], 0, {}, prior=reversed_)
    optimizer.ask(1)
    assert not optimizer.prior_dropped
