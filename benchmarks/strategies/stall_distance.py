"""Where runs that end short of the optimum stop: for each run of a farm strategy (failed configs
kept, batch 1), its final fraction of the optimum, how many parameters its incumbent must change
to reach a config within 0.97 of the optimum (Hamming distance), and how many configs of the
landscape are faster than its incumbent. A run that ends one parameter away from a good config
is what a local step fixes (tuner/strategies/local.py); one far away is not. Also: how many of
the incumbent's one-parameter neighbours the run never measured (0: a proven local optimum, where
the local arm has nothing left to try).

Usage:
    python benchmarks/strategies/stall_distance.py LANDSCAPES NAME[,NAME...] [--farm 'bayes:key=value,...']
        [--budget 100] [--repeats 10] [--seeds FIRST:END]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from compare_all import farm_options
from threadpoolctl import threadpool_limits

from kernelfarm.core.landscape import load_landscape
from kernelfarm.tuner.strategies.candidates import candidate_table
from kernelfarm.tuner.strategies.local import incumbent_index
from kernelfarm.tuner.strategies.observed import table_rows
from kernelfarm.tuner.strategies.registry import get_strategy
from kernelfarm.tuner.strategy_benchmark.replay import replay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("landscapes", type=Path)
    parser.add_argument("names")
    parser.add_argument("--farm", default="bayes")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seeds", help="FIRST:END, instead of seeds 0 to --repeats - 1")
    args = parser.parse_args()
    first, end = 0, args.repeats
    if args.seeds:
        try:
            first, end = (int(v) for v in args.seeds.split(":"))
        except ValueError:
            parser.error(f"--seeds takes FIRST:END (two integers), not {args.seeds!r}")
    strategy, options = farm_options(args.farm)
    threadpool_limits(1)
    for name in args.names.split(","):
        landscape = load_landscape(next(args.landscapes.glob(f"{name}.json*")))
        times = {k: r.mean_ms for k, r in landscape.entries.items() if r.failure is None and r.mean_ms is not None}
        optimum = min(times.values())
        good = [landscape.space.config_from_key(k) for k, t in times.items() if optimum / t >= 0.97]
        print(f"{name}: {len(times)} configs that work, {len(good)} within 0.97")
        table = candidate_table(landscape.space, {})
        for seed in range(first, end):
            run = replay(landscape, get_strategy(strategy), args.budget, seed, options=options)
            found_at = incumbent_index(run.history)
            assert found_at is not None
            best = run.history[found_at]
            assert best.value is not None
            distance = min(sum(best.config[p] != g[p] for p in best.config) for g in good)
            faster = sum(1 for t in times.values() if t < best.value)
            rows = table_rows(table, landscape.space, run.history)
            near = table.neighbours(rows[found_at : found_at + 1])
            untried = int((~np.isin(near, rows)).sum())
            print(f"  seed {seed}: fraction {optimum / best.value:.3f} (found at {found_at + 1}), {distance} "
                  f"parameters from 0.97, {faster} configs faster, {untried} of {len(near)} neighbours "
                  "never measured")  # fmt: skip


if __name__ == "__main__":
    main()
