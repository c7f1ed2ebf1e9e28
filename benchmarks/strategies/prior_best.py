"""How good the prior's best configs are on the target: what the warm-start gate probes and the
job's first seeds (issue 17, eleventh session: ``prior_consensus``).

For each seed, the prior is the one warm_start_pairs.py builds for the target (the other GPUs of
its family, read from its ``--prior-cache``). Printed: the target fraction (target optimum / time,
0 for a failing config) of the prior's first ``--k`` configs by score (transfer.PriorSummary.best:
the seeds' order, and the probe's with ``prior_consensus=0``) and with ``consensus`` (configs that
two or more sources measured among their best fraction ``consensus`` first: the default probes
the first with 0.1), one column per ``--consensus`` value.

Usage:
    python benchmarks/strategies/prior_best.py --landscapes LANDSCAPES --target NAME \
        --prior-cache prior_cache.pkl.gz [--seeds 0:30] [--k 3] [--consensus 0.1 --consensus 1.0]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from miss_evidence import fractions
from warm_start_pairs import WARM_ARMS, read_prior_cache

from kernelfarm.core.landscape import load_landscape
from kernelfarm.tuner.strategies.candidates import candidate_table
from kernelfarm.tuner.strategies.observed import table_rows
from kernelfarm.tuner.strategies.transfer import summarize_prior
from kernelfarm.tuner.strategy_benchmark.families import family_of
from kernelfarm.tuner.strategy_benchmark.runner import landscape_name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--landscapes", type=Path, required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--prior-cache", type=Path, required=True, help="warm_start_pairs.py's --prior-cache")
    parser.add_argument("--arm", default="warm", choices=WARM_ARMS)
    parser.add_argument("--seeds", default="0:30", help="first:last (exclusive)")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--consensus", type=float, action="append", help="default: 0.1 and 1.0")
    args = parser.parse_args()
    paths = {landscape_name(p): p for p in sorted(args.landscapes.glob("*.json*"))}
    sources = sorted(s for s in paths if family_of(s) == family_of(args.target) and s != args.target)
    cache = read_prior_cache(args.prior_cache)
    landscape = load_landscape(paths[args.target])
    table = candidate_table(landscape.space, {})
    fraction = fractions(landscape, table)
    consensus = args.consensus or [0.1, 1.0]
    first, last = (int(x) for x in args.seeds.split(":"))
    print(f"{args.target} ({args.arm} prior from {', '.join(sources)}): target fraction of the prior's "
          f"first {args.k} configs")  # fmt: skip
    print("seed | by score | " + " | ".join(f"consensus {c:g}" for c in consensus))
    for seed in range(first, last):
        prior = [o for s in sources for o in cache[s, seed, args.arm]]
        summary = summarize_prior(prior, table_rows(table, landscape.space, prior), "copula")
        if summary is None:
            continue
        cells = [summary.best(args.k, c) for c in (0.0, *consensus)]
        print(f"{seed:4d} | " + " | ".join(" ".join(f"{fraction[r]:.2f}" for r in rows) for rows in cells))


if __name__ == "__main__":
    main()
