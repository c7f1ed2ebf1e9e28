"""Runs that have not reached 0.95 of the optimum: would an evolutionary arm's children land on a
config within 0.95 (a needle) more often than the model's proposals do?

For each seed's run of ``bayes`` (failed configs kept, batch 1) and each evaluation count in
``--at`` where the run's best is still below 0.95, the share of needles among ``--children``
children drawn the way ``genetic`` draws them (tournament-selected parents from the best
``population`` successful configs, uniform crossover, mutation mostly to adjacent values; only
valid unmeasured children count), for each population size in ``--populations``; and with
mutation off (crossover alone). A share of s means an arm of k proposals reaches a needle with
chance 1 - (1 - s)^k; the model's own rate is in needle_ranks.py's reports (a needle in the
ask's top 5 in 10 of 105 stuck asks, seventeenth session).

Scratch diagnostics, not a strategy (docs/benchmarks/STRATEGIES.md, issue 17, seventeenth session).

Usage:
    python benchmarks/strategies/crossover_reach.py LANDSCAPES NAME [--seeds 0:30] [--at 40,60]
        [--children 4000] [--populations 5,10,20] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from needle_ranks import GOOD, add_stuck_run_arguments, stuck_asks, stuck_run_setup

from kernelfarm.tuner.strategies.candidates import CandidateTable
from kernelfarm.tuner.strategies.genetic import GeneticAlgorithm
from kernelfarm.tuner.strategies.observed import Observed, observe


def needle_share(
    landscape: Any,
    table: CandidateTable,
    fraction: np.ndarray,
    history: list[Any],
    observed: Observed,
    free: np.ndarray,
    population: int,
    mutation: float,
    count: int,
    seed: int,
) -> dict[str, float]:
    """Share of needles among ``count`` valid unmeasured children (``free``: the table rows not yet
    measured), and how many distinct children were drawn (the arm's reachable set)."""
    options = {"population": population, "mutation": mutation}
    ga = GeneticAlgorithm.from_history(landscape.space, {}, history, seed, options)
    assert isinstance(ga, GeneticAlgorithm)  # from_history is typed as returning the base Optimizer
    parents = observed.success_rows[np.argsort(observed.log_time, kind="stable")[:population]]
    rng = np.random.default_rng(seed)
    rows = [ga._child(table, parents, free, rng) for _ in range(count)]
    drawn = np.array([r for r in rows if r >= 0], dtype=np.int64)
    if not len(drawn):
        return {"share": 0.0, "distinct": 0, "distinct_needles": 0}
    return {
        "share": float((fraction[drawn] >= GOOD).mean()),
        "distinct": len(np.unique(drawn)),
        "distinct_needles": int((fraction[np.unique(drawn)] >= GOOD).sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_stuck_run_arguments(parser, seeds="0:30")
    parser.add_argument("--children", type=int, default=4000)
    parser.add_argument("--populations", default="5,10,20")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    try:
        populations = sorted({int(v) for v in args.populations.split(",")})
    except ValueError:
        parser.error("--populations takes comma-separated integers")
    if args.children < 1 or min(populations) < 2:
        parser.error("--children must be at least 1 and every population at least 2")
    recorded, seeds, at = stuck_run_setup(parser, args)
    landscape, table, fraction, _ = recorded
    report: dict[str, Any] = {"landscape": args.name, "good": int((fraction >= GOOD).sum()), "asks": []}
    for seed, n, reached, history in stuck_asks(recorded, seeds, at):
        observed = observe(table, landscape.space, history)
        free = np.ones(len(table), dtype=bool)
        free[observed.seen_rows] = False
        shared = (landscape, table, fraction, history, observed, free)
        ask: dict[str, Any] = {"seed": seed, "at": n, "incumbent": reached}
        for size in populations:
            ask[f"ga{size}"] = needle_share(*shared, size, 0.0, args.children, seed)
            # mutation 0 means genetic's default rate (1 / parameters); a tiny one is crossover alone
            ask[f"cross{size}"] = needle_share(*shared, size, 1e-12, args.children, seed)
        report["asks"].append(ask)
        cells = "; ".join(
            f"{k} {v['share']:.4f} ({v['distinct_needles']} of {v['distinct']})"
            for k, v in ask.items()
            if isinstance(v, dict)
        )
        print(f"  seed {seed} at {n} (best {reached:.3f}): {cells}", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
