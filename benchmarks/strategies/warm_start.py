"""Does warm start help? Replays a job cold and warm-started from an earlier job's trials.

For each landscape and repeat r: an earlier job runs the strategy for ``--prior-budget``
evaluations on a related source landscape (tuner/strategy_benchmark/transfer.py: "similar", "different", or
"unrelated" = shuffled), and its observations become the ``prior`` of a new job on the real
landscape, compared with the same job started cold (same seed). Failed configs are kept.
Also reported: how good the prior's best config is on the target (transfer with no tuning).

Usage:
    python benchmarks/strategies/warm_start.py LANDSCAPE... [--strategy bayes] [--budget 100] \
        [--repeats 10] [--jobs 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kernelfarm.core.landscape import Landscape, load_landscape
from kernelfarm.tuner.strategies.base import Observation
from kernelfarm.tuner.strategies.registry import get_strategy
from kernelfarm.tuner.strategy_benchmark.metrics import CHECKPOINTS, summarize
from kernelfarm.tuner.strategy_benchmark.replay import replay
from kernelfarm.tuner.strategy_benchmark.runner import landscape_name
from kernelfarm.tuner.strategy_benchmark.transfer import distorted, shuffled

LEVELS: dict[str, tuple[float, float] | None] = {
    "similar": (0.1, 0.05),  # (smooth shift, noise) in standard deviations of log time
    "different": (0.4, 0.2),
    "unrelated": None,
}


def source(landscape: Landscape, level: str, seed: int) -> Landscape:
    spec = LEVELS[level]
    return shuffled(landscape, seed) if spec is None else distorted(landscape, spec[0], spec[1], seed)


def _task(
    args: tuple[str, str, str | None, int, int, int, dict[str, Any]],
) -> tuple[list[float | None], float | None]:
    """(trace of the target job, target time of the prior's best config) for one repeat."""
    path, strategy, level, budget, prior_budget, seed, options = args
    target = load_landscape(Path(path))
    cls = get_strategy(strategy)
    prior: list[Observation] = []
    prior_best: float | None = None
    if level is not None:
        earlier = source(target, level, 10_000 + seed)
        prior = replay(earlier, cls, prior_budget, 20_000 + seed).history
        done = [o for o in prior if o.value is not None]
        if done:
            best = min(done, key=lambda o: o.value or 0.0)
            prior_best = target.entries[target.space.key(best.config)].mean_ms
    return replay(target, cls, budget, seed, options=options, prior=prior).values, prior_best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("landscapes", nargs="+", type=Path)
    parser.add_argument("--strategy", default="bayes")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--prior-budget", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--levels", default="cold," + ",".join(LEVELS), help="comma-separated subset")
    parser.add_argument("--option", action="append", default=[], help="KEY=VALUE (JSON) for the warm job")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    options = {k: json.loads(v) for k, _, v in (o.partition("=") for o in args.option)}
    levels: list[str | None] = [None if name == "cold" else name for name in args.levels.split(",")]
    report: dict[str, Any] = {"settings": vars(args) | {"landscapes": [str(p) for p in args.landscapes], "json": None}}
    report["settings"]["levels"] = {k: v for k, v in LEVELS.items()}
    report["landscapes"] = {}
    console = Console()
    with ProcessPoolExecutor(args.jobs) as pool:
        for path in args.landscapes:
            landscape = load_landscape(path)
            optimum = min(r.mean_ms for r in landscape.entries.values() if r.mean_ms is not None)
            table = Table(
                title=f"{landscape_name(path)}: warm start ({args.strategy}, failed configs kept)", title_justify="left"
            )
            for column in (
                "prior",
                "prior best on target",
                *(f"frac@{b}" for b in CHECKPOINTS if b <= args.budget),
                "n90",
                "n95",
            ):
                table.add_column(column, justify="right")
            entry: dict[str, Any] = {}
            for level in levels:
                tasks = [
                    (str(path), args.strategy, level, args.budget, args.prior_budget, args.seed + r, options)
                    for r in range(args.repeats)
                ]
                results = list(pool.map(_task, tasks))
                summary: dict[str, Any] = summarize([t for t, _ in results], optimum, args.budget).as_dict()
                bests = [optimum / b for _, b in results if b]
                summary["prior_best_fraction"] = statistics.fmean(bests) if bests else None
                entry[level or "cold"] = summary
                table.add_row(
                    level or "cold (none)",
                    "-" if not bests else f"{statistics.fmean(bests):.3f}",
                    *(f"{summary['frac_at'][str(b)]:.3f}" for b in CHECKPOINTS if b <= args.budget),
                    _n(summary["n90_median"], summary["n90_success"], args.budget),
                    _n(summary["n95_median"], summary["n95_success"], args.budget),
                )
            report["landscapes"][landscape_name(path)] = entry
            console.print(table)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2, default=str) + "\n")


def _n(median: float | None, success: float, budget: int) -> str:
    return f"{'>' + str(budget) if median is None else f'{median:g}'} ({100 * success:.0f}%)"


if __name__ == "__main__":
    main()
