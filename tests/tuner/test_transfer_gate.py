"""The warm-start gate (tuner/strategies/transfer.py): a prior whose ranking of the job's own
measured configs disagrees is dropped, and the job goes on as a cold one; one that agrees stays."""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from kernelfarm.core.space import Config
from kernelfarm.core.states import FailureKind
from kernelfarm.core.strategy_options.bayes import BayesSettings
from kernelfarm.tuner.coordinator import _prior_verdict
from kernelfarm.tuner.history import describe_prior, prior_use
from kernelfarm.tuner.strategies import bayes, transfer
from kernelfarm.tuner.strategies.base import Observation
from kernelfarm.tuner.strategies.bayes import BayesianOptimizer
from kernelfarm.tuner.strategies.candidates import candidate_table
from kernelfarm.tuner.strategies.design import maximin
from kernelfarm.tuner.strategies.observed import table_rows
from kernelfarm.tuner.strategies.registry import get_strategy
from kernelfarm.tuner.strategies.transfer import (
    GATE_MIN,
    calibrated_agreement,
    first_success_positions,
    first_successes,
    prefix_agreement,
    prior_models,
    rank_agreement,
    summarize_prior,
)
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
    assert first_success_positions(history, np.array([3, 1, 3, 2]), limit=5) == [0, 3]


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
    # the ranking alone (gate_rescue off) drops it at once
    warm = BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {"gate_rescue": False}, prior=reversed_)
    cold = BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {})
    proposed = warm.ask(2)
    assert warm.prior_dropped
    # the job's status
    assert describe_prior(reversed_, warm.prior_dropped).endswith("own measurements disagree with them)")
    assert proposed == cold.ask(2)  # the design topped up to the cold size, the cold model: the cold job's picks
    # a negative gate: no gate, the prior kept whatever it says (the behaviour before the gate)
    kept = BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {"transfer_gate": -1.0}, prior=reversed_)
    assert kept.ask(2) != proposed
    assert not kept.prior_dropped
    # the default rescues nothing here: the probe (the prior's best config, the job's slowest) is
    # measured, hidden, and the job makes the cold job's proposals, one evaluation later
    rescuing = BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {}, prior=reversed_)
    (probe, _) = rescuing.ask(2)
    assert rescuing.prior_probing and probe == min(reversed_, key=lambda o: o.value or math.inf).config
    measured = [*history, Observation(probe, objective(probe))]
    after = BayesianOptimizer.from_history(SPACE, CONTEXT, measured, 0, {}, prior=reversed_)
    assert after.ask(2) == proposed and after.prior_dropped


def test_before_the_gate_the_prior_waits_and_the_job_is_the_cold_one() -> None:
    """Until the gate has judged the prior (``GATE_MIN`` measured configs), the job proposes what
    the cold job would: a prior the gate then drops has cost nothing. With ``gate_first`` off,
    the prior's best configs come first (the gate then judges it on configs it chose itself)."""
    history, related, _ = _history_and_priors()
    for n in range(GATE_MIN):
        warm = BayesianOptimizer.from_history(SPACE, CONTEXT, history[:n], 0, {}, prior=related)
        cold = BayesianOptimizer.from_history(SPACE, CONTEXT, history[:n], 0, {})
        assert warm.ask(2) == cold.ask(2)
        assert not warm.prior_dropped
    seeds_first = BayesianOptimizer.from_history(SPACE, CONTEXT, [], 0, {"gate_first": False}, prior=related)
    best_prior = min(related, key=lambda o: o.value or 0.0).config
    assert seeds_first.ask(1) == [best_prior]
    # once the gate has passed the prior, its best configs are proposed before anything else
    kept = BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {}, prior=related)
    assert kept.ask(1) == [best_prior] and not kept.prior_dropped


def test_a_prior_the_gate_drops_leaves_the_job_exactly_the_cold_one() -> None:
    """A job driven step by step with a misleading prior makes the cold job's every proposal: with
    the ranking alone (``gate_rescue`` off) from the start; by default around the one config the
    rescue probes (the prior's best, the job's slowest), which is hidden: one evaluation later."""
    _, _, reversed_ = _history_and_priors()
    cold, _ = _drive([], 12, {})
    ranking_only, _ = _drive(reversed_, 12, {"gate_rescue": False})
    assert [o.config for o in ranking_only] == [o.config for o in cold]
    rescuing, states = _drive(reversed_, 13, {})
    probe = states.index("probe")
    assert states[probe + 1 :] == ["drop"] * (12 - probe)
    assert [o.config for o in rescuing[:probe] + rescuing[probe + 1 :]] == [o.config for o in cold]


def test_calibrated_agreement_measures_tau_against_the_null_models_spread() -> None:
    rng = np.random.default_rng(5)
    target = rng.standard_normal(12)
    nulls = np.vstack([rng.permutation(target) for _ in range(8)])
    related = calibrated_agreement(target + 0.1 * rng.standard_normal(12), nulls, target, 4)
    assert len(related) == 9 and related[-1] > 3  # far outside what the null models reach
    unrelated = calibrated_agreement(rng.permutation(target), nulls, target, 4)
    assert abs(unrelated[-1]) < 3
    assert calibrated_agreement(target, nulls[:0], target, 4).size == 0  # no null models: nothing to say


def test_the_prior_is_modelled_once_per_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate and the model share one fitted (or cached) prior: each lookup hashes the space."""
    history, related, _ = _history_and_priors()
    calls = []

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return prior_models(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(bayes, "prior_models", counted)
    optimizer = BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {}, prior=related)
    assert optimizer.ask(2) and not optimizer.prior_dropped
    assert len(calls) == 1


def test_agreement_no_better_than_smooth_unrelated_functions_is_not_enough() -> None:
    """Over a few nearby configs two smooth functions are often monotone together by chance: tau 1
    on 6 points is 2.8 analytic standard errors, but null models that are as often increasing as
    decreasing there put it at less than one of their own (the gate's verdict: drop)."""
    target = np.arange(6.0)
    nulls = np.vstack([target if i % 2 else -target for i in range(8)])
    assert rank_agreement(target, target) > 2.5  # the analytic gate would keep this prior
    assert calibrated_agreement(target, nulls, target, 4)[-1] < 1.0


@pytest.mark.parametrize(
    ("agreement", "verdict"),
    [
        ([0.5, 0.7, 1.5], "wait"),  # positive but not yet convincing: held back, at no cost
        ([0.5, 2.5, 1.2], "keep"),  # admitted at the second prefix, then still above transfer_gate
        ([2.5, 0.5], "drop"),  # admitted, then a prefix below transfer_gate: dropped for good
        ([-0.1, 3.0], "drop"),  # no better than the null models once: dropped for good
    ],
)
def test_the_gate_holds_a_prior_back_until_the_evidence_decides(
    monkeypatch: pytest.MonkeyPatch, agreement: list[float], verdict: str
) -> None:
    """The sequential test without the probe (``gate_probe`` off: admitted at ``gate_admit``)."""
    history, related, _ = _history_and_priors()
    monkeypatch.setattr(bayes, "calibrated_agreement", lambda *args: np.array(agreement))
    options = {"gate_probe": False, "gate_admit": 2.0}
    warm = BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, options, prior=related)
    cold = BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {})
    proposed = warm.ask(2)
    assert warm.prior_dropped == (verdict == "drop")
    assert warm.prior_used == (verdict == "keep")
    assert (proposed == cold.ask(2)) == (verdict != "keep")  # waiting or dropped: the cold job's picks


def _drive(prior: list[Observation], steps: int, options: Mapping[str, object]) -> tuple[list[Observation], list[str]]:
    """The job step by step (one config per step): its history and the gate's state at each ask."""
    done: list[Observation] = []
    states: list[str] = []
    for _ in range(steps):
        optimizer = BayesianOptimizer.from_history(SPACE, CONTEXT, done, 0, options, prior=prior)
        (config,) = optimizer.ask(1)
        states.append("probe" if optimizer.prior_probing else "keep" if optimizer.prior_used else
                      "drop" if optimizer.prior_dropped else "wait")  # fmt: skip
        value = objective(config)
        done.append(Observation(config, value, None if value is not None else FailureKind.LAUNCH))
    return done, states


def _time_on_target(config: Config) -> float:
    """The job's own time for a config that runs there (objective() fails only its corner)."""
    value = objective(config)
    assert value is not None, f"{config} fails on the job's objective"
    return value


def _successes(history: list[Observation]) -> int:
    return sum(1 for o in history if o.value is not None)


def _slowest_on_target(prior: list[Observation]) -> Observation:
    """The prior's observation whose config is the slowest on the job's own objective."""
    return max((o for o in prior if objective(o.config) is not None), key=lambda o: objective(o.config) or 0.0)


def _forced_agreement(monkeypatch: pytest.MonkeyPatch, z: float) -> None:
    """Every prefix of the job's measured configs agrees with the prior at z null-model SDs."""
    monkeypatch.setattr(bayes, "calibrated_agreement", lambda prior, nulls, target, start: np.full(
        max(len(target) - start + 1, 0), z))  # fmt: skip


def _always_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    _forced_agreement(monkeypatch, 3.0)


def _always_disagrees(monkeypatch: pytest.MonkeyPatch) -> None:
    _forced_agreement(monkeypatch, -3.0)


@pytest.mark.parametrize("z", [3.0, -3.0])
def test_a_probe_that_is_slow_drops_the_prior_and_leaves_the_job_the_cold_one_a_step_later(
    monkeypatch: pytest.MonkeyPatch, z: float
) -> None:
    """The prior ranks the job's configs alike (forced: z = 3), or against them (z = -3: the probe
    is ``gate_rescue``'s), but its best config is slow here: the probe measures slower than a config
    the job already has, so the prior is dropped and the probe hidden: every later proposal is the
    cold job's, one evaluation later."""
    _forced_agreement(monkeypatch, z)
    _, related, _ = _history_and_priors()
    slowest = _slowest_on_target(related)
    misleading = [Observation(o.config, 1e-3 if o is slowest else o.value, source=o.source) for o in related]
    warm, states = _drive(misleading, 14, {})
    cold, _ = _drive([], 13, {})
    probe = states.index("probe")
    assert _successes(warm[:probe]) == GATE_MIN  # at the first prefix the gate judges
    assert warm[probe].config == slowest.config
    assert states[probe + 1 :] == ["drop"] * (13 - probe)
    assert [o.config for o in warm[:probe] + warm[probe + 1 :]] == [o.config for o in cold]


def test_a_probe_that_is_the_jobs_fastest_admits_the_prior(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same agreement and a prior whose best config is the fastest measured so far: admitted,
    and its next best configs come next; without the probe the prior is admitted a step earlier."""
    _always_agrees(monkeypatch)
    _, related, _ = _history_and_priors()
    warm, states = _drive(related, 10, {})
    best_prior = min(related, key=lambda o: o.value or 0.0).config
    probe = states.index("probe")
    assert states[:probe] == ["wait"] * probe and _successes(warm[:probe]) == GATE_MIN
    assert warm[probe].config == best_prior
    assert _time_on_target(best_prior) < min(objective(o.config) or math.inf for o in warm[:probe])
    assert states[probe + 1 :] == ["keep"] * (10 - probe - 1)
    _, direct = _drive(related, probe + 1, {"gate_probe": False})
    assert direct[probe] == "keep"


def test_a_pending_probe_keeps_the_prior_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    _always_agrees(monkeypatch)
    _, related, _ = _history_and_priors()
    warm, states = _drive(related, 10, {})
    probe = states.index("probe")
    pending = [*warm[:probe], Observation(warm[probe].config, None, pending=True)]
    optimizer = BayesianOptimizer.from_history(SPACE, CONTEXT, pending, 0, {}, prior=related)
    proposed = optimizer.ask(2)
    assert not optimizer.prior_used and not optimizer.prior_dropped and not optimizer.prior_probing
    assert warm[probe].config not in proposed and len(proposed) == 2


def test_the_status_says_when_the_prior_is_held_back() -> None:
    history, related, _ = _history_and_priors()
    waiting = BayesianOptimizer.from_history(SPACE, CONTEXT, history[:2], 0, {}, prior=related)
    waiting.ask(1)
    assert not waiting.prior_used and not waiting.prior_dropped
    assert describe_prior(related, waiting.prior_dropped, waiting=not waiting.prior_used).endswith(
        "show they rank its configs alike)"
    )
    assert describe_prior(related).endswith(("RTX 3090", "other"))  # admitted or no gate: no remark
    # what the coordinator makes of it: (dropped, waiting), for the job's status and its warm_start_prior
    assert _prior_verdict(related, waiting) == (False, True)
    assert prior_use(related, False, True)["state"] == "held_back"
    probing = BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {}, prior=related)
    probing.ask(1)  # the gate proposes the probe: the prior is still held back
    assert probing.prior_probing and _prior_verdict(related, probing) == (False, True)
    admitted = BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, {"gate_probe": False}, prior=related)
    admitted.ask(1)
    assert admitted.prior_used and _prior_verdict(related, admitted) == (False, False)
    genetic = get_strategy("genetic").from_history(SPACE, CONTEXT, history[:2], 0, {}, prior=related)
    assert _prior_verdict(related, genetic) == (False, False)  # no gate: every prior is used
    assert prior_use(related) == {
        "trials": len(related), "sources": sorted({o.source or "?" for o in related}), "state": "in_use"
    }  # fmt: skip
    assert prior_use([])["state"] == "none" and prior_use(related, dropped=True)["state"] == "dropped"


def test_a_banned_row_is_never_picked_and_leaves_the_other_picks_as_they_were() -> None:
    """The hidden probe stays in maximin's random subsample (so its draws are the cold job's) but
    is never picked: the picks are those without the ban, with the banned row skipped."""
    features = np.random.default_rng(1).standard_normal((3000, 3))
    free = np.arange(3000)
    placed = np.array([0, 1])
    plain = maximin(features, free, placed, 6, np.random.default_rng(7))
    banned = maximin(features, free, placed, 5, np.random.default_rng(7), banned=np.array([plain[2]]))
    assert plain[2] not in banned
    assert banned[:2] == plain[:2]
    # a banned row that would not have been picked changes nothing: the random draws are the same
    unpicked = int(np.setdiff1d(free, plain)[0])
    assert maximin(features, free, placed, 6, np.random.default_rng(7), banned=np.array([unpicked])) == plain


@pytest.mark.parametrize(
    ("agreement", "gate_drop", "verdict"),
    [
        ([-0.4, 3.0], 0.0, "drop"),  # the default: a prefix below the null models drops the prior
        ([-0.4, 3.0], 0.5, "keep"),  # within the margin: held back, then admitted
        ([-0.6, 3.0], 0.5, "drop"),  # past it: dropped for good
    ],
)
def test_gate_drop_is_how_far_below_the_null_models_a_prefix_may_fall(
    monkeypatch: pytest.MonkeyPatch, agreement: list[float], gate_drop: float, verdict: str
) -> None:
    history, related, _ = _history_and_priors()
    monkeypatch.setattr(bayes, "calibrated_agreement", lambda *args: np.array(agreement))
    options = {"gate_probe": False, "gate_admit": 2.0, "gate_drop": gate_drop}
    warm = BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, options, prior=related)
    warm.ask(2)
    assert warm.prior_dropped == (verdict == "drop")
    assert warm.prior_used == (verdict == "keep")


def _fresh_prior_caches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Empty model caches for this test, and the sizes every prior fit of hyperparameters gets."""
    monkeypatch.setattr(transfer, "_MODELS", OrderedDict())
    monkeypatch.setattr(transfer, "_HYPERPARAMETERS", OrderedDict())
    sizes: list[int] = []
    fit = transfer.fit_hyperparameters

    def counted(x: np.ndarray, y: np.ndarray, *args: Any, **kwargs: Any) -> Any:
        sizes.append(len(x))
        return fit(x, y, *args, **kwargs)

    monkeypatch.setattr(transfer, "fit_hyperparameters", counted)
    return sizes


def test_prior_fit_max_is_how_many_prior_points_fit_the_prior_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """The prior's GP and its null models fit their hyperparameters on ``prior_fit_max`` of its
    points (0: the objective model's ``fit_max``)."""
    history, related, _ = _history_and_priors()
    for options, expected in (({"fit_max": 16, "prior_fit_max": 0}, 16), ({"fit_max": 16, "prior_fit_max": 40}, 40)):
        sizes = _fresh_prior_caches(monkeypatch)
        BayesianOptimizer.from_history(SPACE, CONTEXT, history, 0, options, prior=related).ask(1)
        assert sizes == [expected] * (1 + BayesSettings().gate_nulls)


def test_prior_models_evicted_from_the_cache_are_rebuilt_without_refitting(monkeypatch: pytest.MonkeyPatch) -> None:
    """More warm jobs than the model cache keeps: their hyperparameters are still known, so the
    models come back the same without a fit (a fit of 9 models can take a second)."""
    _, related, _ = _history_and_priors()
    sizes = _fresh_prior_caches(monkeypatch)
    table = candidate_table(SPACE, CONTEXT)
    features = table.model_features(False)
    summary = summarize_prior(related, table_rows(table, SPACE, related), "copula")
    assert summary is not None
    first = prior_models(table, features, summary, 8, 256, 64)
    fits = len(sizes)
    assert fits == 9
    transfer._MODELS.clear()
    again = prior_models(table, features, summary, 8, 256, 64)
    assert len(sizes) == fits and again is not first
    for old, new in zip((first.prior, *first.nulls), (again.prior, *again.nulls), strict=True):
        np.testing.assert_array_equal(old.mean(features), new.mean(features))


def _prior_best(prior: list[Observation], k: int) -> list[Any]:
    """The prior's k best configs, best first (one source: its scores rank as its times)."""
    return [o.config for o in sorted(prior, key=lambda o: o.value or math.inf)[:k]]


def test_without_gate_rescue_a_disagreeing_ranking_drops_the_prior_unprobed(monkeypatch: pytest.MonkeyPatch) -> None:
    _always_disagrees(monkeypatch)
    _, related, _ = _history_and_priors()
    warm, states = _drive(related, 8, {"gate_rescue": False})
    cold, _ = _drive([], 8, {})
    assert "probe" not in states and states[-1] == "drop"
    assert [o.config for o in warm] == [o.config for o in cold]


def test_gate_rescue_admits_a_prior_whose_two_best_configs_beat_the_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ranking disagrees (forced), but the prior's best config, probed, and then its second
    best are each faster than every config the job measured before the probe: admitted, and kept
    (its later prefixes are not checked within ``STICKY_MAX``)."""
    _always_disagrees(monkeypatch)
    _, related, _ = _history_and_priors()
    warm, states = _drive(related, 10, {})
    best, second = _prior_best(related, 2)
    probe = states.index("probe")
    assert states[:probe] == ["wait"] * probe and _successes(warm[:probe]) == GATE_MIN
    assert warm[probe].config == best
    fastest_before = min(objective(o.config) or math.inf for o in warm[:probe])
    assert _time_on_target(best) < fastest_before and _time_on_target(second) < fastest_before
    assert warm[probe + 1].config == second  # the admitted prior's seeds come first
    assert states[probe + 1 :] == ["keep"] * (10 - probe - 1)


def test_gate_rescue_drops_a_prior_whose_second_best_config_is_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe beats the job's configs, but the prior's second best config, measured next, does
    not: one fast config is chance for an unrelated prior 1 in k + 1 times, so the rescue needs two.
    Both are hidden: the job is the cold one, two evaluations later."""
    _always_disagrees(monkeypatch)
    _, related, _ = _history_and_priors()
    best = min(related, key=lambda o: o.value or math.inf)
    slowest = _slowest_on_target(related)
    # the slowest config on the target becomes the prior's second best
    second_slow = [Observation(o.config, (best.value or 0.0) * 1.001 if o is slowest else o.value, source=o.source)
                   for o in related]  # fmt: skip
    assert _prior_best(second_slow, 2) == [best.config, slowest.config]
    warm, states = _drive(second_slow, 14, {})
    cold, _ = _drive([], 12, {})
    probe = states.index("probe")
    assert warm[probe].config == best.config and warm[probe + 1].config == slowest.config
    assert states[probe + 1] == "keep"  # admitted on the probe; its second best is proposed
    assert states[probe + 2 :] == ["drop"] * (14 - probe - 2)
    assert [o.config for o in warm[:probe] + warm[probe + 2 :]] == [o.config for o in cold]


def test_the_prior_summary_knows_how_far_up_a_second_source_ranks_each_config() -> None:
    """``runner_up``: the second best of a config's rank quantiles over the sources that measured
    it ((position + 1) / configs that source measured); inf where one source measured it."""
    valid = [c for c in SPACE.valid_configs(CONTEXT) if objective(c) is not None][:6]
    times = {
        "a": [1.0, 2.0, 3.0, 4.0, None, None],
        "b": [2.0, 1.0, None, None, 3.0, 4.0],
        "c": [2.0, None, 1.0, None, None, None],
    }
    prior = [Observation(c, t, source=s) for s, ts in times.items()
             for c, t in zip(valid, ts, strict=True) if t is not None]  # fmt: skip
    table = candidate_table(SPACE, CONTEXT)
    summary = summarize_prior(prior, table_rows(table, SPACE, prior), "copula")
    assert summary is not None
    config_rows = table_rows(table, SPACE, [Observation(c, 1.0) for c in valid]).tolist()
    by_config = dict(zip(config_rows, range(6), strict=True))
    runner_up = {by_config[r]: q for r, q in zip(summary.rows.tolist(), summary.runner_up.tolist(), strict=True)}
    # config 0: a 1/4, b 2/4, c 2/2; config 1: a 2/4, b 1/4; config 2: a 3/4, c 1/2
    assert runner_up == {0: 0.5, 1: 0.5, 2: 0.75, 3: math.inf, 4: math.inf, 5: math.inf}


def test_prior_best_puts_the_agreed_configs_first_only_with_consensus() -> None:
    """Rows 10 and 12 lead by score; 11 and 13 are among two sources' best tenth / third."""
    summary = transfer.PriorSummary(
        rows=np.array([10, 11, 12, 13]),
        score=np.array([-2.0, -1.5, -1.0, 0.5]),
        runner_up=np.array([math.inf, 0.05, math.inf, 0.3]),
    )
    assert summary.best(3) == [10, 11, 12]
    assert summary.best(3, 0.1) == [11, 10, 12]
    assert summary.best(4, 0.5) == [11, 13, 10, 12]
    one_source = transfer.PriorSummary(summary.rows, summary.score, np.full(4, math.inf))
    assert one_source.best(4, 0.1) == one_source.best(4) == [10, 11, 12, 13]


def _specialty_prior() -> tuple[list[Observation], Any, Any]:
    """Two sources that rank alike, and a third whose best config is its own: the slowest config
    on the job's objective, which it measured fastest of 30. Returns the prior, the best config of
    the two (agreed on) and the third's own."""
    _, related, _ = _history_and_priors()
    shared, own = related[:22], related[22:]
    specialty = _slowest_on_target(own)
    prior = [Observation(o.config, o.value, source=s) for s in ("a", "b") for o in shared]
    prior += [Observation(o.config, 1e-3 if o is specialty else o.value, source="c") for o in own]
    agreed = min(shared, key=lambda o: o.value or math.inf)
    return prior, agreed.config, specialty.config


def test_prior_consensus_probes_a_config_two_sources_rank_among_their_best(monkeypatch: pytest.MonkeyPatch) -> None:
    """By score the third source's own best config comes first; with ``prior_consensus`` (default) the
    config the other two both rank first is probed instead, and admits the prior; without it, the
    specialty is probed, measures slow here, and the prior is dropped."""
    _always_agrees(monkeypatch)
    prior, agreed, specialty = _specialty_prior()
    table = candidate_table(SPACE, CONTEXT)
    summary = summarize_prior(prior, table_rows(table, SPACE, prior), "copula")
    assert summary is not None
    (best,) = summary.best(1)
    assert table_rows(table, SPACE, [Observation(specialty, 1.0)]).tolist() == [best]
    for options, expected, then in (({}, agreed, "keep"), ({"prior_consensus": 0.0}, specialty, "drop")):
        warm, states = _drive(prior, 10, options)
        probe = states.index("probe")
        assert warm[probe].config == expected
        assert states[probe + 1 :] == [then] * (10 - probe - 1)


def test_a_rescue_is_confirmed_by_another_config_than_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agreed config the gate probes is also the prior's second best by score, so the rescue's
    second confirmation is its best by score: the third source's own, slow here. The rescue fails
    on it and both are hidden: the job is the cold one, two evaluations later (confirmed by the
    probe again, the prior would have been admitted on one fast config)."""
    _always_disagrees(monkeypatch)
    prior, agreed, specialty = _specialty_prior()
    table = candidate_table(SPACE, CONTEXT)
    summary = summarize_prior(prior, table_rows(table, SPACE, prior), "copula")
    assert summary is not None
    assert summary.best(2)[1] == summary.best(1, 0.1)[0]  # the probe is the second by score
    warm, states = _drive(prior, 14, {})
    cold, _ = _drive([], 12, {})
    probe = states.index("probe")
    assert warm[probe].config == agreed and warm[probe + 1].config == specialty
    assert states[probe + 2 :] == ["drop"] * (14 - probe - 2)
    assert [o.config for o in warm[:probe] + warm[probe + 2 :]] == [o.config for o in cold]


def _judged_prefix(history: list[Observation]) -> list[Observation]:
    """The job's history up to its GATE_MIN-th measured config (what the gate judges first)."""
    done = 0
    for i, obs in enumerate(history):
        done += obs.value is not None
        if done == GATE_MIN:
            return history[: i + 1]
    raise AssertionError("fewer than GATE_MIN measured configs")


@pytest.mark.parametrize("z", [3.0, -3.0])
def test_a_probe_the_jobs_design_measured_and_others_beat_drops_the_prior_off_nothing(
    monkeypatch: pytest.MonkeyPatch, z: float
) -> None:
    """The prior's best config is one the cold job's own design measured among the configs the
    gate judges first, and another of those is faster: the prior is dropped and nothing is
    hidden, so the job is exactly the cold one. Before (issue 17, thirteenth session), the config
    was hidden while the gate waited, which changed the design, and judged only against the
    configs measured before it: measured first, it passed for any prior."""
    _forced_agreement(monkeypatch, z)
    cold, _ = _drive([], 10, {})
    judged = [o for o in _judged_prefix(cold) if o.value is not None]
    slow = max(judged, key=lambda o: o.value or 0.0)
    _, related, _ = _history_and_priors()
    prior = [Observation(slow.config, 1e-4, source="other"), *(o for o in related if o.config != slow.config)]
    warm, states = _drive(prior, 10, {})
    assert [o.config for o in warm] == [o.config for o in cold]
    assert "probe" not in states and "keep" not in states and states[-1] == "drop"


def test_a_probe_the_jobs_design_measured_as_its_fastest_admits_the_prior(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same with the fastest of those configs as the prior's best: no probe is proposed (it is
    measured), and the prior is admitted once the gate has its first prefix."""
    _always_agrees(monkeypatch)
    cold, _ = _drive([], 10, {})
    prefix = _judged_prefix(cold)
    fast = min((o for o in prefix if o.value is not None), key=lambda o: o.value or 0.0)
    _, related, _ = _history_and_priors()
    prior = [Observation(fast.config, 1e-4, source="other"), *(o for o in related if o.config != fast.config)]
    warm, states = _drive(prior, 10, {})
    assert [o.config for o in warm[: len(prefix)]] == [o.config for o in prefix]
    assert "probe" not in states and states[len(prefix) :] == ["keep"] * (10 - len(prefix))
