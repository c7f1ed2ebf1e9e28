"""Where the prior's model ranks the target's good configs, by how many prior points fit its
hyperparameters (issue 17, ninth session: ``prior_fit_max``).

For each target and repeat r, the prior is what warm_start_pairs.py builds (the other GPUs of the
family, a ``--prior-strategy`` job of ``--prior-trials`` on each, seed 1000 + r). The prior's GP
(transfer.prior_models, as the warm job fits it) orders the target's whole space by its predicted
time; printed per fit size: the position of the first config within 0.95 of the target's optimum
in that order, and the target fraction of the model's top config and of the best of its top 5.

Usage:
    python benchmarks/strategies/prior_order.py --landscapes LANDSCAPES --only convolution_milo_A4000 \
        [--repeats 3] [--fit 64 --fit 256]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from miss_evidence import fractions
from warm_start_pairs import _prior

from kernelfarm.core.landscape import load_landscape
from kernelfarm.tuner.strategies.candidates import candidate_table
from kernelfarm.tuner.strategies.observed import table_rows
from kernelfarm.tuner.strategies.transfer import prior_models, summarize_prior
from kernelfarm.tuner.strategy_benchmark.families import by_family, family_of
from kernelfarm.tuner.strategy_benchmark.runner import landscape_name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--landscapes", type=Path, required=True)
    parser.add_argument("--only", action="append", required=True, help="target landscape names")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fit", type=int, action="append", help="hyperparameter fit sizes (default: 64 and 256)")
    parser.add_argument("--prior-strategy", default="bayes")
    parser.add_argument("--prior-trials", type=int, default=100)
    args = parser.parse_args()
    paths = {landscape_name(p): p for p in sorted(args.landscapes.glob("*.json*"))}
    families = by_family(paths)
    for target in args.only:
        landscape = load_landscape(paths[target])
        space = landscape.space
        table = candidate_table(space, {})
        features = table.model_features(False)
        fraction = fractions(landscape, table)
        good = fraction >= 0.95
        sources = [s for s in families[family_of(target)] if s != target]
        for r in range(args.repeats):
            prior = _prior(paths, sources, args, r, "warm")
            summary = summarize_prior(prior, table_rows(table, space, prior), "copula")
            if summary is None:
                continue
            cells = []
            for fit in args.fit or [64, 256]:
                models = prior_models(table, features, summary, 0, 256, fit)
                order = np.argsort(models.prior.mean(features), kind="stable")
                first = int(np.flatnonzero(good[order])[0]) + 1
                cells.append(f"fit {fit}: first within 0.95 at {first}, top 1 {fraction[order[0]]:.2f}, "
                             f"best of top 5 {fraction[order[:5]].max():.2f}")  # fmt: skip
            print(f"{target} r={r} ({len(summary.rows)} prior configs) | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
