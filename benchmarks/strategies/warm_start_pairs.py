"""Cross-GPU warm start on the real pairs: each landscape as the target, the other GPUs of its
family (the same kernel and problem) as the prior.

For each target and repeat r: every other GPU of the family contributes the trials of an earlier
job there (``--prior-strategy`` for ``--prior-trials`` evaluations, seed 1000 + r, marked with
that GPU as the observation's source), and a new job on the target runs ``--strategy`` with that
prior, compared with the same job cold (seed r) and with an *unrelated* prior: the same earlier
trials with their times shuffled among them (tuner/strategy_benchmark/transfer.py ``shuffled``
applied to each source), which keeps every config valid but breaks any relation to the target.
That prior's configs are still the ones a tuner chose on related GPUs, so they lean towards
regions that are good on the target too; the arm ``unrelated_random`` is stricter: each source's
earlier job is ``random`` sampling (``--prior-trials`` configs drawn uniformly, seed 1000 + r) on
the shuffled source, so neither its configs nor its times carry anything about the target.
Failed configs are kept (each costs an evaluation). Also reported: the target fraction of the
best config of the prior (what copying the other GPUs' winner would give, no tuning).

``--strategy`` and ``--prior-strategy`` take options as compare_all.py's ``--farm`` does
(``'bayes:gate_nulls=0'``).

Usage:
    python benchmarks/strategies/warm_start_pairs.py --landscapes LANDSCAPES [--budget 100] \
        [--prior-trials 100] [--prior-strategy bayes] [--repeats 10] [--jobs 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import pickle
import statistics
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from compare_all import farm_options

from kernelfarm.core.landscape import load_landscape
from kernelfarm.tuner.strategies.base import Observation
from kernelfarm.tuner.strategies.registry import get_strategy
from kernelfarm.tuner.strategy_benchmark.families import by_family, family_of
from kernelfarm.tuner.strategy_benchmark.metrics import evaluations_to, fraction_curve, summarize
from kernelfarm.tuner.strategy_benchmark.replay import replay
from kernelfarm.tuner.strategy_benchmark.runner import landscape_name
from kernelfarm.tuner.strategy_benchmark.transfer import shuffled

ARMS = ("cold", "warm", "unrelated", "unrelated_random")
WARM_ARMS = ARMS[1:]  # the arms with a prior


PriorKey = tuple[str, int, str]  # (source GPU's landscape, repeat's seed, arm)


def _source_run(job: tuple[Path, str, int, str, argparse.Namespace]) -> list[Observation]:
    """One source's earlier job for a warm arm: its trials, marked with that GPU as their source."""
    path, name, seed, arm, args = job
    landscape = load_landscape(path)
    if arm != "warm":
        landscape = shuffled(landscape, 30_000 + seed)
    strategy, options = ("random", {}) if arm == "unrelated_random" else farm_options(args.prior_strategy)
    run = replay(landscape, get_strategy(strategy), args.prior_trials, 1000 + seed, options=options)
    return [replace(o, source=name) for o in run.history]


def _prior(
    paths: dict[str, Path], sources: list[str], args: argparse.Namespace, seed: int, arm: str
) -> list[Observation]:
    out: list[Observation] = []
    for name in sources:
        out += _source_run((paths[name], name, seed, arm, args))
    return out


def read_prior_cache(path: Path) -> dict[PriorKey, list[Observation]]:
    """The source jobs kept by ``--prior-cache``."""
    cached: dict[PriorKey, list[Observation]] = pickle.loads(gzip.decompress(path.read_bytes()))
    return cached


def _source_runs(
    paths: dict[str, Path], keys: set[PriorKey], args: argparse.Namespace, pool: ProcessPoolExecutor
) -> dict[PriorKey, list[Observation]]:
    """Every source job the targets' priors need, each run once (a source's job at a seed is the
    same whichever target it serves), kept in ``--prior-cache`` for later runs with other options."""
    cache: dict[PriorKey, list[Observation]] = {}
    path = args.prior_cache
    if path is not None and path.exists():
        cache = read_prior_cache(path)
    missing = sorted(keys - set(cache))
    jobs = [(paths[name], name, seed, arm, args) for name, seed, arm in missing]
    cache.update(zip(missing, pool.map(_source_run, jobs), strict=True))
    if path is not None and missing:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(pickle.dumps(cache)))
    return cache


def _task(
    job: tuple[str, dict[str, Path], list[Observation], str, int, argparse.Namespace],
) -> tuple[list[float | None], float | None]:
    target, paths, prior, arm, seed, args = job
    sources = sorted({o.source for o in prior if o.source is not None})
    landscape = load_landscape(paths[target])
    best_of_prior = None
    done = [o for o in prior if o.value is not None]
    if arm == "warm" and done:
        # the target time of each source's best config; the best of those (copying a winner)
        winners = [min((o for o in done if o.source == s), key=lambda o: o.value or 0.0) for s in sources
                   if any(o.source == s for o in done)]  # fmt: skip
        times = [landscape.entries[landscape.space.key(o.config)].mean_ms for o in winners
                 if landscape.space.key(o.config) in landscape.entries]  # fmt: skip
        measured = [t for t in times if t is not None]
        best_of_prior = min(measured) if measured else None
    name, options = farm_options(args.strategy)
    run = replay(landscape, get_strategy(name), args.budget, seed, options=options, prior=prior)
    return run.values, best_of_prior


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--landscapes", type=Path, required=True)
    parser.add_argument("--only", action="append", help="target landscape names (default: all)")
    parser.add_argument("--strategy", default="bayes", help="a farm strategy, with options as in compare_all.py --farm")
    parser.add_argument("--prior-strategy", default="bayes")
    parser.add_argument("--prior-trials", type=int, default=100)
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--prior-cache", type=Path,
        help="a file keeping the source jobs (pickle, gzip) for runs that change only --strategy; "
        "it is only valid for the same --prior-strategy, --prior-trials and landscapes",
    )  # fmt: skip
    args = parser.parse_args()
    if unknown := set(args.arms.split(",")) - set(ARMS):
        parser.error(f"unknown arms {sorted(unknown)}; choose from {', '.join(ARMS)}")
    paths = {landscape_name(p): p for p in sorted(args.landscapes.glob("*.json*"))}
    families = by_family(paths)
    targets = [t for t in paths if not args.only or t in args.only]
    arms = args.arms.split(",")
    sources = {t: [s for s in families[family_of(t)] if s != t] for t in targets}
    warm_arms = [arm for arm in arms if arm != "cold"]
    keys = {(s, args.seed + r, arm)
            for t in targets for arm in warm_arms for s in sources[t] for r in range(args.repeats)}  # fmt: skip
    with ProcessPoolExecutor(args.jobs) as pool:
        runs = _source_runs(paths, keys, args, pool)

        def prior(target: str, arm: str, seed: int) -> list[Observation]:
            return [] if arm == "cold" else [o for s in sources[target] for o in runs[s, seed, arm]]

        jobs = [(t, paths, prior(t, arm, args.seed + r), arm, args.seed + r, args)
                for t in targets for arm in arms for r in range(args.repeats)]  # fmt: skip
        results = list(pool.map(_task, jobs))
    report: dict[str, Any] = {"settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                              "landscapes": {}}  # fmt: skip
    it = iter(results)
    for t in targets:
        landscape = load_landscape(paths[t])
        optimum = min(r.mean_ms for r in landscape.entries.values() if r.mean_ms is not None)
        entry: dict[str, Any] = {"sources": [s for s in families[family_of(t)] if s != t]}
        for arm in arms:
            arm_runs = [next(it) for _ in range(args.repeats)]
            summary: dict[str, Any] = summarize([v for v, _ in arm_runs], optimum, args.budget).as_dict()
            copied = [optimum / b for _, b in arm_runs if b]
            summary["prior_best_fraction"] = statistics.fmean(copied) if copied else None
            # each run's evaluations to 0.95, in seed order: arms and reports compare run by run
            # (paired_harm.py), not only by their medians
            summary["n95_runs"] = [evaluations_to(fraction_curve(v, optimum, args.budget), 0.95) for v, _ in arm_runs]
            entry[arm] = summary
            print(t, arm, summary["frac_at"], summary["n95_median"], summary["n95_success"], flush=True)
        report["landscapes"][t] = entry
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
