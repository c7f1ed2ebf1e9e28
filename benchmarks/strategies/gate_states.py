"""The warm-start gate's state at every ask, run by run, for two option sets side by side: where a
gate change moves a job, and what it did there.

For each seed, the target is replayed with the prior warm_start_pairs.py builds for it (the other
GPUs of its family; ``--arm``: unrelated priors instead), once per option set. Each run prints its
evaluations to 0.95 and one letter per ask: w (the prior waits), P (probe), K (kept), D (dropped).

Usage:
    python benchmarks/strategies/gate_states.py --landscapes LANDSCAPES --target NAME \
        --prior-cache prior_cache.pkl.gz [--seeds 0:8] [--arm unrelated] [--options '{}' '{"gate_rescue": false}']
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, ClassVar

from warm_start_pairs import WARM_ARMS, read_prior_cache

from kernelfarm.core.landscape import load_landscape
from kernelfarm.tuner.strategies.bayes import BayesianOptimizer
from kernelfarm.tuner.strategy_benchmark.families import family_of
from kernelfarm.tuner.strategy_benchmark.metrics import evaluations_to, fraction_curve
from kernelfarm.tuner.strategy_benchmark.replay import replay
from kernelfarm.tuner.strategy_benchmark.runner import landscape_name


class Traced(BayesianOptimizer):
    """The strategy, noting the gate's state after each ask (the replay builds one per ask)."""

    states: ClassVar[list[str]] = []

    def ask(self, n: int) -> list[Any]:
        out = super().ask(n)
        Traced.states.append("P" if self.prior_probing else "K" if self.prior_used else
                             "D" if self.prior_dropped else "w")  # fmt: skip
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--landscapes", type=Path, required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--prior-cache", type=Path, required=True, help="warm_start_pairs.py's --prior-cache")
    parser.add_argument("--seeds", default="0:8", help="first:last (exclusive)")
    parser.add_argument(
        "--arm", default="warm", choices=WARM_ARMS,
        help="whose priors: the other GPUs' jobs, their times shuffled, or random configs (warm_start_pairs.py's arms)",
    )  # fmt: skip
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--options", nargs=2, default=["{}", '{"gate_rescue": false}'], help="two JSON objects")
    args = parser.parse_args()
    paths = {landscape_name(p): p for p in sorted(args.landscapes.glob("*.json*"))}
    sources = sorted(s for s in paths if family_of(s) == family_of(args.target) and s != args.target)
    cache = read_prior_cache(args.prior_cache)
    landscape = load_landscape(paths[args.target])
    optimum = min(r.mean_ms for r in landscape.entries.values() if r.mean_ms is not None)
    options = [json.loads(o) for o in args.options]
    first, last = (int(x) for x in args.seeds.split(":"))
    print(f"{args.target}, options {args.options[0]} | {args.options[1]}: evaluations to 0.95, then states")
    for seed in range(first, last):
        prior = [o for s in sources for o in cache[s, seed, args.arm]]
        cells = []
        for option in options:
            Traced.states = []
            run = replay(landscape, Traced, args.budget, seed, options=option, prior=prior)
            reached = evaluations_to(fraction_curve(run.values, optimum, args.budget), 0.95)
            label = str(reached) if reached is not None else f">{args.budget}"
            cells.append(f"{label:>4} {''.join(Traced.states[:25])}")
        print(f"seed {seed:3d}: " + " | ".join(cells))


if __name__ == "__main__":
    main()
