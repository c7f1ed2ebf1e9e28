"""Where runs that end short of the optimum stop: for each run of a farm strategy (failed configs
kept, batch 1), its final fraction of the optimum, how many parameters its incumbent must change
to reach a config within 0.97 of the optimum (Hamming distance), and how many configs of the
landscape are faster than its incumbent. A run that ends one parameter away from a good config
is what a local step fixes (tuner/strategies/local.py); one far away is not.

Usage:
    python benchmarks/strategies/stall_distance.py LANDSCAPES NAME[,NAME...] [--farm 'bayes:key=value,...']
        [--budget 100] [--repeats 10]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from compare_all import farm_options
from threadpoolctl import threadpool_limits

from kernelfarm.core.landscape import load_landscape
from kernelfarm.tuner.strategies.registry import get_strategy
from kernelfarm.tuner.strategy_benchmark.replay import replay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("landscapes", type=Path)
    parser.add_argument("names")
    parser.add_argument("--farm", default="bayes")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    strategy, options = farm_options(args.farm)
    threadpool_limits(1)
    for name in args.names.split(","):
        landscape = load_landscape(next(args.landscapes.glob(f"{name}.json*")))
        times = {k: r.mean_ms for k, r in landscape.entries.items() if r.failure is None and r.mean_ms is not None}
        optimum = min(times.values())
        good = [landscape.space.config_from_key(k) for k, t in times.items() if optimum / t >= 0.97]
        print(f"{name}: {len(times)} configs that work, {len(good)} within 0.97")
        for seed in range(args.repeats):
            run = replay(landscape, get_strategy(strategy), args.budget, seed, options=options)
            best = min((o for o in run.history if o.value is not None), key=lambda o: o.value or 0.0)
            assert best.value is not None
            distance = min(sum(best.config[p] != g[p] for p in best.config) for g in good)
            faster = sum(1 for t in times.values() if t < best.value)
            print(f"  seed {seed}: fraction {optimum / best.value:.3f}, {distance} parameters from 0.97, "
                  f"{faster} configs faster")  # fmt: skip


if __name__ == "__main__":
    main()
