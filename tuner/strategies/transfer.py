"""Warm start by transfer: a model of earlier jobs (other GPU models, same kernel and problem)
becomes the mean of this job's model, scaled by a factor learned from this job's own trials.

Why this shape: the same kernel on another GPU is usually *ranked* alike (a tile size that
starves one GPU starves the next) but timed differently (another clock, memory bus, core count),
so the prior is modelled on each source's own scale (log times warped to normal scores per source
GPU, then pooled) and enters the job's model as ``offset + scale * prior_mean(x)``, with a GP on
what is left. ``scale`` is a ridge estimate pulled towards 1 by ``strength`` pseudo-observations:
before the job has data the prior is trusted as it is; once the job's own times disagree with it
(an unrelated prior: no correlation) the estimate falls towards 0 within a few trials, clipped
at 0, and the model is the cold one again.

The scale alone was not enough (issue 17: a shuffled prior cost up to 9 evaluations, real priors
from other vendors' GPUs up to 25): before it has fallen, the prior steers the first model-based
proposals, and the job's space-filling design was cut to make room for it. So the prior is also
*gated*, and judged on the job's own measurements before it may shape anything. How agreement is
measured (:func:`calibrated_agreement`): Kendall's tau between the prior's prediction and the
job's times over the job's first k measured configs, against the taus of *null models* (the
prior's GP refitted to its own scores shuffled among its configs), in their standard deviations.
The analytic standard error of tau that the first gate used assumes independent pairs; a GP's
prediction and a kernel's times are both smooth, so an unrelated prior "agreed" by chance far
more often than it said, and was let back in after being dropped (docs/benchmarks/STRATEGIES.md).
The verdict (bayes.py ``_prior_verdict``) is a sequential test over the prefixes k = ``GATE_MIN``..
``STICKY_MAX``: below 0 drops the prior for good, at least ``gate_admit`` *probes* it, in between
it *waits*; once admitted, a prefix below ``gate`` drops it, and past ``STICKY_MAX`` all the job's
measurements are checked at every ask. The probe (issue 17, fourth session) is the prior's best
config, proposed when the ranking test passes: the prior is admitted only if it measures faster
than every config the job measured before it. Rank agreement over a handful of a space-filling
design's configs, most of them mediocre, separates a real prior from a shuffled one slowly (the
real pairs: at 2 null-model SDs, 131 of 190 real priors admitted at a median 8th evaluation, and
29 of 190 shuffled ones); the other GPUs' best config, by contrast, is usually among the target's
best few percent, where a shuffled prior's is anywhere. A probe that fails is hidden from the job
(its model, design and random draws), so it costs exactly one evaluation. While the prior waits
the job is the cold job (its space-filling design, its model, its feasibility model: the prior is
not used at all), so a prior that is never probed costs nothing; one that is admitted has its
best configs proposed next and becomes the model's mean. A prior dropped after admission is
removed from every part of the model (mean, seeds, feasibility) and the job continues as a cold
job whose design is topped up to the cold size.

A ranking that falls below the null models is not the end either (``gate_rescue``, on by default
since issue 17's tenth session): the other GPUs of a family can agree on the best configs and
disagree on the mediocre ones a space-filling design measures first (convolution_milo_A4000: its
AMD sources dropped at the 4th-5th config in 3 of 4 traced runs, where the prior without a gate
reached 0.95 in 8). So the prior is probed then too, and admitted only if its best config and
then its second best each measure faster than every config the job measured before the probe
(an unrelated prior passes both about once in (k + 1)(k + 2)); what a failed rescue measured is
hidden, so it costs the job one or two evaluations.

Which config is probed (``prior_consensus``, on by default since issue 17's eleventh session): the
prior's best config that two or more of its sources measured among their best tenth, where there
is one (:meth:`PriorSummary.best`), not simply the best-scored one, which may be one GPU's own:
a prior for convolution_milo_MI250X pools an NVIDIA A4000 with two AMD GPUs, and its best-scored
config was below half of MI250X's optimum in 20 of 30 seeds, so the probe failed and a useful
prior was dropped. The rescue's second confirmation is then the best-scored config other than
the probe.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import kendalltau, rankdata

from kernelfarm.tuner.strategies.base import Observation
from kernelfarm.tuner.strategies.candidates import CandidateTable
from kernelfarm.tuner.strategies.gp import GaussianProcess, Hyperparameters, fit_hyperparameters
from kernelfarm.tuner.strategies.observed import observe_rows
from kernelfarm.tuner.strategies.warping import standardize, subset, warp

MIN_PRIOR = 5  # fewer successful prior trials than this carry no usable shape
GATE_MIN = 4  # measured configs of the job's own before the prior's ranking is checked
STICKY_MAX = 20  # the first this many measured configs: a prefix that disagrees drops the prior for good
NULL_SD_MIN = 0.05  # floor of the null models' tau spread (all nulls can tie on a few configs)


@dataclass(frozen=True)
class PriorSummary:
    """Prior successes as rows of this job's table with one standardized score each (lower is
    better; the mean over the sources that measured the row) and ``runner_up``: the second best
    of the row's rank quantiles over the sources that measured it ((position + 1) / configs that
    source measured: its best config is 1 / n; inf where fewer than two sources measured it)."""

    rows: np.ndarray
    score: np.ndarray
    runner_up: np.ndarray

    def best(self, k: int, consensus: float = 0.0) -> list[int]:
        """The ``k`` best-scored rows; ``consensus`` > 0: those that two or more sources measured
        among their best fraction ``consensus`` first (a prior of one source, or whose sources
        share no such config, keeps its order).

        Why: a config one GPU measured among its best may be that GPU's own (convolution_milo's
        A4000 among AMD sources: by score, the prior's best config for MI250X was below half of
        MI250X's optimum in 20 of 30 seeds, median 0.19; with ``consensus`` 0.1 in 11, median
        0.97; issue 17, eleventh session, prior_best.py). Configs that several GPUs measured
        among their best are good across the family; configs they merely all measured are not
        (jobs seeded alike share their design's configs: with those first, gemm_RTX_2080_Ti's
        warm start went from 6 evaluations to over 50)."""
        order = np.argsort(self.score, kind="stable")
        if consensus > 0:
            order = order[np.argsort(self.runner_up[order] > consensus, kind="stable")]
        return [int(r) for r in self.rows[order[:k]]]


def summarize_prior(prior: Sequence[Observation], rows: np.ndarray, transform: str) -> PriorSummary | None:
    """Per source (``Observation.source``: the GPU model), log times warped and standardized on
    that source's own scale; rows measured by several sources get the mean of their scores.
    ``rows``: each prior observation's table row (observed.table_rows)."""
    groups: dict[str | None, list[int]] = {}
    for i, obs in enumerate(prior):
        groups.setdefault(obs.source, []).append(i)
    # per row, one (score, rank quantile) per source that measured it
    measured: dict[int, list[tuple[float, float]]] = {}
    for members in groups.values():
        seen = observe_rows([prior[i] for i in members], rows[members])
        if len(seen.success_rows) < 2:
            continue
        z = standardize(warp(seen.log_time, transform))
        quantile = rankdata(seen.log_time, method="ordinal") / len(z)
        for row, value, q in zip(seen.success_rows.tolist(), z.tolist(), quantile.tolist(), strict=True):
            measured.setdefault(row, []).append((value, q))
    if len(measured) < MIN_PRIOR:
        return None
    rows = np.array(sorted(measured), dtype=np.int64)
    by_row = [measured[r] for r in rows.tolist()]
    score = np.array([sum(value for value, _ in m) / len(m) for m in by_row])
    runner_up = np.array([sorted(q for _, q in m)[1] if len(m) > 1 else np.inf for m in by_row])
    return PriorSummary(rows, score, runner_up)


@dataclass(frozen=True)
class PriorModels:
    """The prior's GP and ``nulls``: GPs fitted the same way to the prior's scores shuffled among
    its configs (what an unrelated prior of the same size and shape would give: the gate's
    reference, :func:`calibrated_agreement`)."""

    prior: GaussianProcess
    nulls: tuple[GaussianProcess, ...]


ModelsKey = tuple[bytes, bytes, bytes, int, int, int, int]
_MODELS: OrderedDict[ModelsKey, PriorModels] = OrderedDict()
_MODELS_KEPT = 8
# Fitting the hyperparameters is what costs (up to a second for 9 models of 256 points, where
# building a GP from them takes milliseconds), and they take a few hundred bytes per prior: many
# more are kept than models, so a coordinator stepping more warm jobs than _MODELS_KEPT in turn
# rebuilds their models instead of refitting them at every step.
_HYPERPARAMETERS: OrderedDict[ModelsKey, tuple[Hyperparameters, ...]] = OrderedDict()
_HYPERPARAMETERS_KEPT = 1024


def prior_models(
    table: CandidateTable, features: np.ndarray, summary: PriorSummary, nulls: int, train_max: int, fit_max: int
) -> PriorModels:
    """A GP on the prior's scores (at most ``train_max`` points; the best quarter always in), and
    ``nulls`` GPs on the same scores shuffled among the prior's configs (seeded by the prior).

    The prior does not change while a job runs, and the coordinator rebuilds the strategy on
    every step, so the fitted models are kept per process (keyed by the prior itself; their random
    subsets are seeded by the prior, not the step, so cached and fresh models are the same).
    ``features``: the table's model features (all columns, or the plain ones, see candidates.py)."""
    space = hashlib.blake2b(table.codes.tobytes(), digest_size=16).digest()
    key = (space, summary.rows.tobytes(), summary.score.tobytes(), features.shape[1], nulls, train_max, fit_max)
    if key in _MODELS:
        _MODELS.move_to_end(key)
        return _MODELS[key]
    seed = int(hashlib.blake2b(summary.rows.tobytes(), digest_size=8).hexdigest(), 16)
    shuffle = np.random.default_rng(seed + 1)
    scores = [summary.score, *(summary.score[shuffle.permutation(len(summary.score))] for _ in range(nulls))]
    fitted = _HYPERPARAMETERS.get(key) or (None,) * len(scores)
    gps = [_fit_prior(features, summary.rows, score, seed, train_max, fit_max, hp)
           for score, hp in zip(scores, fitted, strict=True)]  # fmt: skip
    models = PriorModels(gps[0], tuple(gps[1:]))
    _keep(_MODELS, key, models, _MODELS_KEPT)
    _keep(_HYPERPARAMETERS, key, tuple(gp.hp for gp in gps), _HYPERPARAMETERS_KEPT)
    return models


def _keep(cache: OrderedDict[ModelsKey, Any], key: ModelsKey, value: Any, kept: int) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > kept:
        cache.popitem(last=False)


def _fit_prior(
    features: np.ndarray,
    rows: np.ndarray,
    score: np.ndarray,
    seed: int,
    train_max: int,
    fit_max: int,
    hp: Hyperparameters | None = None,
) -> GaussianProcess:
    """The GP on ``score`` at ``rows`` (at most ``train_max``, the best quarter always in), its
    hyperparameters fitted on at most ``fit_max`` of them unless given (``hp``: fitted before)."""
    rng = np.random.default_rng(seed)
    keep = subset(len(rows), train_max, score, rng)
    rows, score = rows[keep], standardize(score[keep])
    x = features[rows]
    if hp is None:
        fit = subset(len(rows), fit_max, score, rng)
        hp = fit_hyperparameters(x[fit], score[fit])
    return GaussianProcess(x, score, hp)


def learned_scale(prior_mean: np.ndarray, target: np.ndarray, strength: float) -> tuple[float, float]:
    """(offset, scale) of ``target ~ offset + scale * prior_mean``: ridge regression with
    ``strength`` pseudo-observations of scale 1, scale clipped to [0, 1.5]."""
    if len(target) == 0:
        return 0.0, 1.0
    m_mean, t_mean = float(prior_mean.mean()), float(target.mean())
    dm, dt = prior_mean - m_mean, target - t_mean
    scale = (float(dm @ dt) + strength) / (float(dm @ dm) + strength)
    scale = min(max(scale, 0.0), 1.5)
    return t_mean - scale * m_mean, scale


def rank_agreement(prior_mean: np.ndarray, target: np.ndarray) -> float:
    """Kendall's tau between the prior's prediction and the job's own log times at the job's
    measured configs, in standard errors under "no relation" (0 with fewer than 3 points)."""
    n = len(target)
    if n < 3 or np.ptp(prior_mean) == 0 or np.ptp(target) == 0:
        return 0.0
    tau = float(kendalltau(prior_mean, target).statistic)
    if not np.isfinite(tau):
        return 0.0
    return tau / float(np.sqrt(2.0 * (2 * n + 5) / (9.0 * n * (n - 1))))


def first_success_positions(history: Sequence[Observation], rows: np.ndarray, limit: int) -> list[int]:
    """Positions in ``history`` of the job's first ``limit`` distinct measured configs, in the
    order they were proposed (``rows``: each observation's table row, -1 outside the table).

    The list stops at the first trial still pending: with parallel workers a trial proposed early
    can finish after later ones, and skipping it would insert it into the list later, changing
    prefixes already judged. Stopping there makes the list only ever grow at its end, so a prefix
    the gate once judged stays as it was ("dropped for good" holds)."""
    seen: set[int] = set()
    out: list[int] = []
    for i, (obs, row) in enumerate(zip(history, rows.tolist(), strict=True)):
        if len(out) >= limit or obs.pending:
            break
        value = obs.value
        if row < 0 or row in seen or obs.failure is not None or value is None:
            continue
        if not (value > 0 and math.isfinite(value)):
            continue
        seen.add(row)
        out.append(i)
    return out


def first_successes(history: Sequence[Observation], rows: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """Table rows and log times of the job's first ``limit`` distinct measured configs
    (first_success_positions: in the order proposed, up to the first trial still pending)."""
    at = first_success_positions(history, rows, limit)
    log_time = [math.log(history[i].value or 0.0) for i in at]  # measured: value > 0
    return np.array([int(rows[i]) for i in at], dtype=np.int64), np.array(log_time)


def prefix_agreement(prior_mean: np.ndarray, target: np.ndarray, start: int) -> np.ndarray:
    """Kendall's tau-a of the first k points for k = start..n (sign only matters to the gate's
    prefix check: tau-a and tau-b share it). O(n^2) in numpy: n is at most ``STICKY_MAX``, and a
    library call per prefix cost more than the rest of the gate (an ask re-checks every prefix).
    ``prior_mean`` may be (m, n), several predictions at once: the result is then (m, prefixes)."""
    n = len(target)
    if n < max(start, 2):
        return np.zeros((*prior_mean.shape[:-1], 0))
    target_signs = np.sign(target[:, None] - target[None, :])
    signs = np.sign(prior_mean[..., :, None] - prior_mean[..., None, :]) * target_signs
    upper = np.triu(signs, 1)  # pair (i, j), i < j, counted when j joins the prefix
    concordant = np.cumsum(upper.sum(axis=-2), axis=-1)  # after the first k points: entry k - 1
    k = np.arange(1, n + 1)
    pairs = np.maximum(k * (k - 1) / 2, 1)
    return (concordant / pairs)[..., start - 1 :]


def calibrated_agreement(prior_mean: np.ndarray, null_means: np.ndarray, target: np.ndarray, start: int) -> np.ndarray:
    """The gate's statistic for each prefix k = start..n: Kendall's tau-a between the prior's
    prediction and the job's log times over the first k measured configs, minus the mean tau of
    the null models (``null_means``: (nulls, n) their predictions at the same configs), in
    standard deviations of those null taus.

    Why not :func:`rank_agreement`'s analytic standard error: it holds for independent pairs, but
    a GP's prediction is smooth and so are the job's times, and two unrelated smooth functions
    agree or disagree by chance far more often over a handful of nearby configs. Measured (issue
    17, gemm_RTX_3090, a shuffled prior, 10 runs): the analytic gate kept such a prior for all of
    the first 30 evaluations in one run and let it back in for 5-10 evaluations in two others; the
    priors that cost evaluations were exactly those. Null models fitted to the prior's own scores
    shuffled carry the same smoothness, so their spread is the right yardstick."""
    n = len(target)
    if n < max(start, 2) or len(null_means) == 0:
        return np.zeros(0)
    taus = prefix_agreement(np.vstack([prior_mean[None, :], null_means]), target, start)  # (1 + nulls, n - start + 1)
    spread = np.maximum(taus[1:].std(axis=0, ddof=1) if len(null_means) > 1 else 0.0, NULL_SD_MIN)
    return (taus[0] - taus[1:].mean(axis=0)) / spread


def calibrated_agreement_all(prior_mean: np.ndarray, null_means: np.ndarray, target: np.ndarray) -> float:
    """:func:`calibrated_agreement` over all n measured configs at once (Kendall's tau-b by
    scipy: O(n log n) per model where the prefix form is O(n^2)); 0 with fewer than 3 points."""
    if len(target) < 3 or len(null_means) < 2:
        return 0.0
    taus = []
    for mean in [prior_mean, *null_means]:
        tau = float(kendalltau(mean, target).statistic) if np.ptp(mean) > 0 and np.ptp(target) > 0 else 0.0
        taus.append(tau if np.isfinite(tau) else 0.0)
    nulls = np.array(taus[1:])
    return (taus[0] - float(nulls.mean())) / max(float(nulls.std(ddof=1)), NULL_SD_MIN)
