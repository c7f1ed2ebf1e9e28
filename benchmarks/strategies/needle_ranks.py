"""Runs that have not reached 0.95 of the optimum: would another candidate pool, acquisition or
local model have proposed a config within 0.95 at that ask?

Issue 17 asks to fix the cause, not a constant, where the candidate subsample (at most ``pool``
configs scored per ask) or the design is why a needle is missed. For each seed's run of ``bayes``
(failed configs kept, batch 1) and each evaluation count in ``--at`` where the run's best is still
below 0.95, the strategy is rebuilt from that history, as the coordinator would, and asked once;
its objective model at that ask is then used four ways:

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

Scratch diagnostics, not a strategy: the numbers say whether a larger pool, a posterior-sampling
arm or a local model could be the fix (docs/benchmarks/STRATEGIES.md, issue 17, sixteenth session).

Usage:
    python benchmarks/strategies/needle_ranks.py LANDSCAPES NAME [--seeds 0:10] [--at 40,60]
        [--draws 300] [--near 20] [--json OUT.json]
    python benchmarks/strategies/needle_ranks.py --table REPORT.json [REPORT.json ...]

``--table``: per report, over its asks, how often each view has a config within 0.95 among its
first ``TOP`` (the next 5 proposals, had that view made them), and the mean Thompson share.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from kernelfarm.core.landscape import load_landscape
from kernelfarm.tuner.strategies.acquisition import acquisition
from kernelfarm.tuner.strategies.bayes import BayesianOptimizer
from kernelfarm.tuner.strategies.candidates import CandidateTable, candidate_table
from kernelfarm.tuner.strategies.gp import GaussianProcess, PoolPosterior, covariance, fit_hyperparameters
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
        self.seen.update(features=features)
        return features, x, hp

    def _best_open(
        self, posterior: PoolPosterior, offset: np.ndarray, feasible: np.ndarray, best: float, open_: np.ndarray
    ) -> int:
        if "posterior" not in self.seen:  # the first pick: no fantasy has conditioned it yet
            self.seen.update(posterior=posterior, feasible=feasible.copy(), best=best)
        return super()._best_open(posterior, offset, feasible, best, open_)


def _first_rank(fractions_in_order: np.ndarray) -> int | None:
    where = np.flatnonzero(fractions_in_order >= GOOD)
    return int(where[0]) if len(where) else None


def probe_ask(
    landscape: Any, table: CandidateTable, fraction: np.ndarray, history: list[Any], seed: int, args: argparse.Namespace
) -> dict[str, Any]:
    """The four views of one ask (module docstring); ``fraction``: each table row's fraction of
    the optimum (0 where it failed)."""
    probe = _Probe.from_history(landscape.space, {}, history, seed)
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


def _share(asks: list[dict[str, Any]], test: Any) -> str:
    return f"{sum(1 for a in asks if test(a))} / {len(asks)}"


def summary_table(paths: list[Path]) -> str:
    """The reports' summary as a markdown table (``--table``)."""
    head = (
        f"| landscape | asks (runs below {GOOD}) | pool (the ask) | EI alone, pool | every config | "
        "Thompson share (mean) | ball 2 holds one | ball 2, ask's model | ball 2, local model | "
        "ball 3 holds one | ball 3, ask's model | ball 3, local model |"
    )
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for path in paths:
        report = json.loads(path.read_text())
        asks = report["asks"]
        if not asks:
            lines.append(f"| {report['landscape']} | 0 |" + " - |" * 10)
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
        lines.append(f"| {report['landscape']} | {len(asks)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    if "--table" in sys.argv[1:2]:
        print(summary_table([Path(p) for p in sys.argv[2:]]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("landscapes", type=Path)
    parser.add_argument("name")
    parser.add_argument("--seeds", default="0:10", help="FIRST:END")
    parser.add_argument("--at", default="40,60", help="evaluation counts, comma-separated")
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--near", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    try:
        first, end = (int(v) for v in args.seeds.split(":"))
        at = sorted({int(v) for v in args.at.split(",")})
    except ValueError:
        parser.error("--seeds takes FIRST:END and --at comma-separated integers")
    if min(at) < 11 or args.draws < 1 or args.near < 3:
        parser.error("--at must be past the design (11 or more), --draws at least 1, --near at least 3")
    threadpool_limits(1)
    found = sorted(args.landscapes.glob(f"{args.name}.json*"))
    if not found:
        parser.error(f"no recording {args.name}.json* in {args.landscapes}")
    landscape = load_landscape(found[0])
    table = candidate_table(landscape.space, {})
    times = {k: r.mean_ms for k, r in landscape.entries.items() if r.failure is None and r.mean_ms is not None}
    optimum = min(times.values())
    fraction = np.zeros(len(table))
    keys = list(times)
    rows = table.rows_of([landscape.space.config_from_key(k) for k in keys], landscape.space.names)
    fraction[rows[rows >= 0]] = [optimum / times[k] for k, r in zip(keys, rows.tolist(), strict=True) if r >= 0]
    report: dict[str, Any] = {"landscape": args.name, "good": int((fraction >= GOOD).sum()), "asks": []}
    print(f"{args.name}: {len(table)} configs, {report['good']} within {GOOD}")
    for seed in range(first, end):
        run = replay(landscape, BayesianOptimizer, max(at), seed)
        for n in at:
            reached = max((optimum / v for v in run.values[:n] if v), default=0.0)
            if reached >= GOOD:
                continue
            views = probe_ask(landscape, table, fraction, run.history[:n], seed, args)
            report["asks"].append({"seed": seed, "at": n, "incumbent": reached, **views})
            balls = "; ".join(
                f"ball {r}: {views[f'ball{r}']['good']} of {views[f'ball{r}']['size']}, ranks "
                f"{views[f'ball{r}']['rank']} / local {views[f'ball{r}']['local_rank']}"
                for r in (2, 3)
            )
            p_ok = "-" if views["p_ok"] is None else f"{views['p_ok']:.2f}"
            print(f"  seed {seed} at {n} (best {reached:.3f}): pool holds {views['good_in_pool']}, rank "
                  f"{views['pool_rank']} (EI alone {views['pool_ei_rank']}, p_ok {p_ok}); full space rank "
                  f"{views['full_rank']}; Thompson "
                  f"{views['thompson_share']:.3f}; {balls}", flush=True)  # fmt: skip
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
