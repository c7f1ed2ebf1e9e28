"""Runs that have not reached 0.95 of the optimum: would another candidate pool, acquisition or
local model have proposed a config within 0.95 at that ask?

Issue 17 asks to fix the cause, not a constant, where the candidate subsample (at most ``pool``
configs scored per ask) or the design is why a needle is missed. For each seed's run of ``bayes``
(failed configs kept, batch 1) and each evaluation count in ``--at`` where the run's best is still
below 0.95, the strategy is rebuilt from that history, as the coordinator would, and asked once;
its objective model at that ask is then used four ways (six with ``--marginal`` and
``--categorical``):

- ``pool``: how many configs within 0.95 are in this ask's candidate pool, and the best rank of
  one of them under the ask's acquisition (expected improvement times the probability of working;
  rank 0 is what the ask proposes); ``pool_ei``: the same under expected improvement alone, and
  ``p_ok``: the feasibility model's probability of working for the best of them (1 where nothing
  has failed: the model is off).
- ``full``: the same model's rank of the first config within 0.95 when every unmeasured config is
  scored (the pool without its cap), with the probability of working as in the ask.
- ``thompson``: the share of ``--draws`` joint posterior draws over the pool whose minimum is a
  config within 0.95 (Thompson sampling instead of expected improvement; the draws are exact, from
  the eigendecomposition of the pool's posterior covariance).
- ``ball R``: the incumbent's Hamming ball of radius R (unmeasured configs that differ from it in
  at most R parameters): how many within 0.95 it holds, and the rank of the first of them under
  the ask's model (expected improvement) and under a GP fitted to the ``--near`` measured configs
  nearest the incumbent (a trust region's local model, its targets warped and standardized as the
  ask's own).
- ``marginal`` (``--marginal K``): the pool ranked by expected improvement averaged over ``K`` draws
  of the objective model's hyperparameters from their posterior (slice sampling, started at the
  ask's MAP fit, on the same fitted points, targets and hyperprior), times the probability of
  working: the ask's model with its length scales' uncertainty integrated out instead of fixed
  at one MAP value (Snoek, Larochelle & Adams 2012).
- ``categorical`` (``--categorical``): the pool ranked by expected improvement (times the
  probability of working) under a GP whose inputs are the parameters' values as categories: its
  distance counts, per parameter, whether two configs differ (an ARD Hamming distance in the same
  Matérn 5/2 kernel), not how far apart their values are. Fitted on the ask's fitted points and
  targets, its posterior on the ask's training points.

Scratch diagnostics, not a strategy: the numbers say whether a larger pool, a posterior-sampling
arm, a local model or another model could be the fix (docs/benchmarks/STRATEGIES.md, issue 17,
sixteenth and seventeenth sessions).

Usage:
    python benchmarks/strategies/needle_ranks.py LANDSCAPES NAME [--seeds 0:10] [--at 40,60]
        [--draws 300] [--near 20] [--marginal K] [--categorical] [--json OUT.json]
    python benchmarks/strategies/needle_ranks.py --table REPORT.json [REPORT.json ...]

``--table``: per landscape (reports of one landscape, e.g. seed ranges run in parallel, are
pooled), over its asks, how often each view has a config within 0.95 among its
first ``TOP`` (the next 5 proposals, had that view made them), and the mean Thompson share.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import scipy.linalg
from threadpoolctl import threadpool_limits

from kernelfarm.core.landscape import load_landscape
from kernelfarm.tuner.strategies.acquisition import acquisition
from kernelfarm.tuner.strategies.bayes import BayesianOptimizer
from kernelfarm.tuner.strategies.candidates import CandidateTable, candidate_table
from kernelfarm.tuner.strategies.gp import (
    GaussianProcess,
    Hyperparameters,
    PoolPosterior,
    covariance,
    fit_hyperparameters,
    fit_on_components,
    matern52,
    negative_log_posterior,
    squared_differences,
    theta_bounds,
)
from kernelfarm.tuner.strategies.local import incumbent_index
from kernelfarm.tuner.strategies.observed import Observed, table_rows
from kernelfarm.tuner.strategies.warping import standardize, warp
from kernelfarm.tuner.strategy_benchmark.replay import replay

GOOD = 0.95
TOP = 5  # --table: "among the first TOP" of a ranking


class _Probe(BayesianOptimizer):
    """``bayes`` as it is, keeping what its first model-based pick of an ask saw."""

    seen: dict[str, Any]

    def _pool(self, table: CandidateTable, observed: Observed, *args: Any) -> np.ndarray:
        pool = super()._pool(table, observed, *args)
        self.seen = {"pool": pool, "observed": observed}
        return pool

    def _fit_objective(self, *args: Any) -> Any:
        features, x, hp = super()._fit_objective(*args)
        _, train_rows, fit_rows, y, _ = args
        self.seen.update(
            features=features, train_rows=train_rows, fit_rows=fit_rows, train_y=y,
            fit_x=x[fit_rows], fit_y=standardize(y[fit_rows]), hp=hp,
        )  # fmt: skip
        return features, x, hp

    def _best_open(
        self, posterior: PoolPosterior, offset: np.ndarray, feasible: np.ndarray, best: float, open_: np.ndarray
    ) -> int:
        if "posterior" not in self.seen:  # the first pick: no fantasy has conditioned it yet
            self.seen.update(posterior=posterior, feasible=feasible.copy(), best=best)
        return super()._best_open(posterior, offset, feasible, best, open_)


def hyperparameter_draws(
    x: np.ndarray, y: np.ndarray, start: Hyperparameters, prior: np.ndarray | None, count: int, rng: np.random.Generator
) -> list[Hyperparameters]:
    """``count`` draws from the hyperparameters' posterior (the MAP fit's likelihood and hyperprior),
    by coordinate-wise slice sampling with stepping out (Neal 2003) from ``start``: 5 sweeps of
    burn-in, then one draw every 2 sweeps."""
    components = squared_differences(x)
    low, high = np.array(theta_bounds(x.shape[1])).T

    def log_posterior(theta: np.ndarray) -> float:
        if np.any(theta < low) or np.any(theta > high):
            return -np.inf
        return -negative_log_posterior(theta, components, y, prior)[0]

    theta = np.clip(start.to_theta(), low, high)
    current = log_posterior(theta)
    draws: list[Hyperparameters] = []
    for sweep in range(5 + 2 * count):
        for d in range(len(theta)):
            level = current + np.log(rng.uniform())
            left = theta[d] - rng.uniform()
            right = left + 1.0
            for _ in range(8):  # step out, one unit of log scale at a time
                probe = theta.copy()
                probe[d] = left
                if log_posterior(probe) <= level:
                    break
                left -= 1.0
            for _ in range(8):
                probe = theta.copy()
                probe[d] = right
                if log_posterior(probe) <= level:
                    break
                right += 1.0
            while True:  # shrink; terminates since theta[d] itself is inside the slice
                probe = theta.copy()
                probe[d] = rng.uniform(left, right)
                value = log_posterior(probe)
                if value > level:
                    theta, current = probe, value
                    break
                if probe[d] < theta[d]:
                    left = probe[d]
                else:
                    right = probe[d]
        if sweep >= 5 and (sweep - 5) % 2 == 1:
            draws.append(Hyperparameters.from_theta(theta))
    return draws


def _mismatch(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(len(a) * len(b), P) per-parameter 0/1 differences of value-index rows."""
    return (a[:, None, :] != b[None, :, :]).reshape(-1, a.shape[1]).astype(np.float64)


def categorical_ei(
    table: CandidateTable, train_rows: np.ndarray, fit_rows: np.ndarray, y: np.ndarray, pool: np.ndarray, best: float
) -> np.ndarray:
    """Expected improvement over ``pool`` under the Hamming-distance GP (module docstring)."""
    codes = table.indices.astype(np.int64)
    fit = codes[train_rows[fit_rows]]
    hp = fit_on_components(_mismatch(fit, fit), standardize(y[fit_rows]))
    inv_l2 = 1.0 / hp.lengths**2

    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        r = np.sqrt(_mismatch(a, b) @ inv_l2).reshape(len(a), len(b))
        return hp.amplitude * matern52(r)

    train = codes[train_rows]
    k = kernel(train, train) + (hp.noise + 1e-8) * np.eye(len(train))
    chol = scipy.linalg.cholesky(k, lower=True)
    alpha = scipy.linalg.cho_solve((chol, True), y)
    mean, var = np.empty(len(pool)), np.empty(len(pool))
    for start in range(0, len(pool), 500):  # the mismatch tensor of a chunk: 500 x n x P
        cross = kernel(codes[pool[start : start + 500]], train)
        v = scipy.linalg.solve_triangular(chol, cross.T, lower=True)
        mean[start : start + 500] = cross @ alpha
        var[start : start + 500] = np.maximum(hp.amplitude - (v * v).sum(0), 1e-12)
    return acquisition("ei", mean, np.sqrt(var), best)


class Recorded(NamedTuple):
    """A recording, its candidate table, each table row's fraction of the optimum (0 where the
    config failed) and the optimum's time."""

    landscape: Any
    table: CandidateTable
    fraction: np.ndarray
    optimum: float


def add_stuck_run_arguments(parser: argparse.ArgumentParser, seeds: str) -> None:
    """The arguments of a script that probes the default's stuck runs (this one, crossover_reach.py)."""
    parser.add_argument("landscapes", type=Path)
    parser.add_argument("name")
    parser.add_argument("--seeds", default=seeds, help="FIRST:END")
    parser.add_argument("--at", default="40,60", help="evaluation counts, comma-separated")


def stuck_run_setup(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[Recorded, range, list[int]]:
    """The recording, seeds and evaluation counts those arguments name (a usage error when they
    do not parse, ``--at`` is within the design, or there is no such recording); one BLAS thread."""
    try:
        first, end = (int(v) for v in args.seeds.split(":"))
        at = sorted({int(v) for v in args.at.split(",")})
    except ValueError:
        parser.error("--seeds takes FIRST:END and --at comma-separated integers")
    if min(at) < 11:
        parser.error("--at must be past the design (11 or more)")
    threadpool_limits(1)
    found = sorted(args.landscapes.glob(f"{args.name}.json*"))
    if not found:
        parser.error(f"no recording {args.name}.json* in {args.landscapes}")
    return recorded_fractions(found[0]), range(first, end), at


def recorded_fractions(path: Path) -> Recorded:
    """The recording at ``path`` with its table and fractions (``Recorded``)."""
    landscape = load_landscape(path)
    table = candidate_table(landscape.space, {})
    times = {k: r.mean_ms for k, r in landscape.entries.items() if r.failure is None and r.mean_ms is not None}
    optimum = min(times.values())
    fraction = np.zeros(len(table))
    keys = list(times)
    rows = table.rows_of([landscape.space.config_from_key(k) for k in keys], landscape.space.names)
    fraction[rows[rows >= 0]] = [optimum / times[k] for k, r in zip(keys, rows.tolist(), strict=True) if r >= 0]
    return Recorded(landscape, table, fraction, optimum)


def stuck_asks(recorded: Recorded, seeds: range, at: list[int]) -> Iterator[tuple[int, int, float, list[Any]]]:
    """(seed, evaluations, best fraction so far, history) for each seed's run of ``bayes`` (failed
    configs kept, batch 1) and each count in ``at`` where the run is still below ``GOOD``."""
    landscape, optimum = recorded.landscape, recorded.optimum
    for seed in seeds:
        run = replay(landscape, BayesianOptimizer, max(at), seed)
        for n in at:
            reached = max((optimum / v for v in run.values[:n] if v), default=0.0)
            if reached < GOOD:
                yield seed, n, reached, run.history[:n]


def _first_rank(fractions_in_order: np.ndarray) -> int | None:
    where = np.flatnonzero(fractions_in_order >= GOOD)
    return int(where[0]) if len(where) else None


def probe_ask(
    landscape: Any, table: CandidateTable, fraction: np.ndarray, history: list[Any], seed: int, args: argparse.Namespace
) -> dict[str, Any]:
    """The four views of one ask (module docstring); ``fraction``: each table row's fraction of
    the optimum (0 where it failed)."""
    probe = _Probe.from_history(landscape.space, {}, history, seed)
    assert isinstance(probe, _Probe)  # from_history is typed as returning the base Optimizer
    probe.ask(1)
    seen = probe.seen
    post: PoolPosterior = seen["posterior"]
    pool, features, best = seen["pool"], seen["features"], seen["best"]
    m = len(pool)  # pool rows come first in the posterior; fantasies (none at batch 1) after
    mean, std = post.mean[:m], post.std[:m]
    ei, feasible = acquisition("ei", mean, std, best), seen["feasible"][:m]
    rows = table_rows(table, landscape.space, history)
    free = np.setdiff1d(np.arange(len(table)), rows)
    good = fraction[pool] >= GOOD
    out: dict[str, Any] = {"good_in_pool": int(good.sum())}
    out["pool_rank"] = _first_rank(fraction[pool[np.argsort(-ei * feasible, kind="stable")]])
    out["pool_ei_rank"] = _first_rank(fraction[pool[np.argsort(-ei, kind="stable")]])
    out["p_ok"] = float(feasible[good][np.argmax(ei[good])]) if good.any() else None

    whole = post.gp.pool(features[free])
    whole_feasible = probe._feasibility(table, seen["observed"], free, np.random.default_rng(seed))
    full = acquisition("ei", whole.mean, whole.std, best) * whole_feasible
    out["full_rank"] = _first_rank(fraction[free[np.argsort(-full, kind="stable")]])

    cov = covariance(post.z[:m], post.z[:m], post.gp.hp) - post.v[:, :m].T @ post.v[:, :m]
    values, vectors = np.linalg.eigh(cov)
    rng = np.random.default_rng(seed)
    draws = mean[:, None] + vectors @ (np.sqrt(np.maximum(values, 0.0))[:, None] * rng.standard_normal((m, args.draws)))
    out["thompson_share"] = float((fraction[pool[np.argmin(draws, axis=0)]] >= GOOD).mean())

    if args.marginal:
        prior = probe._length_prior(seen["fit_x"].shape[1])
        draws_hp = hyperparameter_draws(seen["fit_x"], seen["fit_y"], seen["hp"], prior, args.marginal, rng)
        gp = post.gp
        averaged = np.zeros(m)
        for hp in draws_hp:
            sample = GaussianProcess(gp.x, gp.y, hp).pool(post.z[:m])
            averaged += acquisition("ei", sample.mean, sample.std, best)
        out["marginal_rank"] = _first_rank(fraction[pool[np.argsort(-averaged * feasible, kind="stable")]])
        lengths = np.array([hp.lengths for hp in draws_hp])
        out["length_spread"] = float(np.median(np.std(np.log(lengths), axis=0)))

    if args.categorical:
        hamming = categorical_ei(table, seen["train_rows"], seen["fit_rows"], seen["train_y"], pool, best)
        out["categorical_rank"] = _first_rank(fraction[pool[np.argsort(-hamming * feasible, kind="stable")]])

    measured = [(r, o.value) for r, o in zip(rows.tolist(), history, strict=True) if r >= 0 and o.value]
    where = incumbent_index(history)
    assert where is not None  # only runs past the design are probed
    incumbent = rows[where]
    distance = (table.indices != table.indices[incumbent]).sum(1)
    near = sorted(measured, key=lambda item: (distance[item[0]], item[1]))[: args.near]
    local_rows = np.array([r for r, _ in near])
    y = standardize(warp(np.log([v for _, v in near]), "copula"))
    local_x = probe._x[local_rows]
    local = GaussianProcess(local_x, y, fit_hyperparameters(local_x, y))
    for radius in (2, 3):
        ball = free[distance[free] <= radius]
        model = post.gp.pool(features[ball])
        ranked = acquisition("ei", model.mean, model.std, best)
        here = local.pool(probe._x[ball])
        local_ei = acquisition("ei", here.mean, here.std, float(y.min()))
        out[f"ball{radius}"] = {
            "size": len(ball),
            "good": int((fraction[ball] >= GOOD).sum()),
            "rank": _first_rank(fraction[ball[np.argsort(-ranked, kind="stable")]]),
            "local_rank": _first_rank(fraction[ball[np.argsort(-local_ei, kind="stable")]]),
        }
    return out


def _top(rank: int | None) -> bool:
    return rank is not None and rank < TOP


def _median_rank(asks: list[dict[str, Any]], key: str) -> str:
    """Median over asks of a view's rank of its first needle; a pool without one ranks last."""
    if not all(key in a for a in asks):
        return "-"
    return f"{np.median([math.inf if a[key] is None else a[key] for a in asks]):.0f}"


def _share(asks: list[dict[str, Any]], test: Any) -> str:
    return f"{sum(1 for a in asks if test(a))} / {len(asks)}"


def summary_table(paths: list[Path]) -> str:
    """The reports' summary as a markdown table (``--table``), one row per landscape."""
    by_landscape: dict[str, list[dict[str, Any]]] = {}
    for path in paths:
        report = json.loads(path.read_text())
        by_landscape.setdefault(report["landscape"], []).extend(report["asks"])
    marginal = any("marginal_rank" in a for asks in by_landscape.values() for a in asks)
    categorical = any("categorical_rank" in a for asks in by_landscape.values() for a in asks)
    head = (
        f"| landscape | asks (runs below {GOOD}) | pool (the ask) | EI alone, pool | every config | "
        "Thompson share (mean) | ball 2 holds one | ball 2, ask's model | ball 2, local model | "
        "ball 3 holds one | ball 3, ask's model | ball 3, local model |"
    )
    if marginal:
        head += " pool, hyperparameters integrated out | spread of log length scales (median) |"
    if categorical:
        head += " pool, Hamming-distance GP |"
    if marginal or categorical:
        head += " median rank of the first needle in the pool: the ask / integrated / Hamming |"
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for name, asks in by_landscape.items():
        if not asks:
            lines.append(f"| {name} | 0 |" + " - |" * (head.count(" | ") - 1))
            continue

        cells = [
            _share(asks, lambda a: _top(a["pool_rank"])),
            _share(asks, lambda a: _top(a["pool_ei_rank"])),
            _share(asks, lambda a: _top(a["full_rank"])),
            f"{np.mean([a['thompson_share'] for a in asks]):.3f}",
        ]
        for radius in (2, 3):
            key = f"ball{radius}"
            cells += [
                _share(asks, lambda a, k=key: a[k]["good"] > 0),
                _share(asks, lambda a, k=key: _top(a[k]["rank"])),
                _share(asks, lambda a, k=key: _top(a[k]["local_rank"])),
            ]
        if marginal:
            cells += [
                _share(asks, lambda a: _top(a.get("marginal_rank"))),
                f"{np.median([a['length_spread'] for a in asks if 'length_spread' in a]):.2f}",
            ]
        if categorical:
            cells.append(_share(asks, lambda a: _top(a.get("categorical_rank"))))
        if marginal or categorical:
            medians = [_median_rank(asks, key) for key in ("pool_rank", "marginal_rank", "categorical_rank")]
            cells.append(" / ".join(medians))
        lines.append(f"| {name} | {len(asks)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    if "--table" in sys.argv[1:2]:
        print(summary_table([Path(p) for p in sys.argv[2:]]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_stuck_run_arguments(parser, seeds="0:10")
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--near", type=int, default=20)
    parser.add_argument("--marginal", type=int, default=0, help="hyperparameter draws (0: view off)")
    parser.add_argument("--categorical", action="store_true", help="the Hamming-distance GP's view")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.draws < 1 or args.near < 3 or args.marginal < 0:
        parser.error("--draws must be at least 1, --near at least 3, --marginal 0 or more")
    recorded, seeds, at = stuck_run_setup(parser, args)
    landscape, table, fraction, _ = recorded
    report: dict[str, Any] = {"landscape": args.name, "good": int((fraction >= GOOD).sum()), "asks": []}
    print(f"{args.name}: {len(table)} configs, {report['good']} within {GOOD}")
    for seed, n, reached, history in stuck_asks(recorded, seeds, at):
        views = probe_ask(landscape, table, fraction, history, seed, args)
        report["asks"].append({"seed": seed, "at": n, "incumbent": reached, **views})
        balls = "; ".join(
            f"ball {r}: {views[f'ball{r}']['good']} of {views[f'ball{r}']['size']}, ranks "
            f"{views[f'ball{r}']['rank']} / local {views[f'ball{r}']['local_rank']}"
            for r in (2, 3)
        )
        p_ok = "-" if views["p_ok"] is None else f"{views['p_ok']:.2f}"
        marginal = f"; marginal {views['marginal_rank']}" if args.marginal else ""
        marginal += f"; categorical {views['categorical_rank']}" if args.categorical else ""
        print(f"  seed {seed} at {n} (best {reached:.3f}): pool holds {views['good_in_pool']}, rank "
              f"{views['pool_rank']}{marginal} (EI alone {views['pool_ei_rank']}, p_ok {p_ok}); full space rank "
              f"{views['full_rank']}; Thompson "
              f"{views['thompson_share']:.3f}; {balls}", flush=True)  # fmt: skip
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
