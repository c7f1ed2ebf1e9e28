"""What the warm-start gate sees on the real pairs, recorded once so gate rules can be compared offline.

While the gate holds a prior back the job is the cold job, run for run (bayes.py ``_prior_verdict``),
so the configs the gate judges are the cold job's first ``--early`` measured configs whatever the
rule. For each target, repeat r and prior (``real``: the other GPUs' trials, as warm_start_pairs.py
builds them, seed 1000 + r; ``shuffled``: the same trials with their times shuffled per source),
this records the cold job's first measured configs (their log times), the prior model's and
``--nulls`` null models' predictions there (the first 8 nulls are the default gate's), and where
the prior's proposed seeds and the prior model's predicted best stand on the target (fraction of
the optimum, percentile). Any rule on these numbers (a statistic, a threshold) gives its admission
step without a replay; the replays (warm_start_pairs.py) then measure the chosen rules.

Usage:
    python benchmarks/strategies/gate_trace.py --landscapes LANDSCAPES [--repeats 10] [--nulls 32] \
        [--early 20] [--jobs 1] --json out.json.gz
    python benchmarks/strategies/gate_trace.py --summary out.json.gz --landscapes LANDSCAPES [--bar 2.0 ...]

``--summary``: per target, where the probe (the prior's best config) stands on the target, and
for each ``--bar`` how many of the real and shuffled priors the default gate (8 null models)
admits directly and how many a probe at that bar would confirm (the probe faster than every
config measured before it), with the median evaluation at which they are admitted.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from warm_start_pairs import _prior

from kernelfarm.core.landscape import load_landscape
from kernelfarm.tuner.strategies.bayes import BayesianOptimizer
from kernelfarm.tuner.strategies.candidates import candidate_table, configs_at
from kernelfarm.tuner.strategies.observed import table_rows
from kernelfarm.tuner.strategies.transfer import (
    GATE_MIN,
    calibrated_agreement,
    first_successes,
    prior_models,
    summarize_prior,
)
from kernelfarm.tuner.strategy_benchmark.families import by_family, family_of
from kernelfarm.tuner.strategy_benchmark.replay import replay
from kernelfarm.tuner.strategy_benchmark.runner import landscape_name


def _task(job: tuple[str, dict[str, Path], list[str], int, argparse.Namespace]) -> dict[str, Any]:
    target, paths, sources, seed, args = job
    landscape = load_landscape(paths[target])
    space = landscape.space
    table = candidate_table(space, {})
    cold = replay(landscape, BayesianOptimizer, args.early_budget, seed)
    rows = table_rows(table, space, cold.history)
    early, early_log = first_successes(cold.history, rows, args.early)
    entries = [r.mean_ms for r in landscape.entries.values() if r.mean_ms is not None and r.failure is None]
    optimum = min(entries)
    ordered = np.sort(np.array(entries))
    features = table.model_features(False)
    out: dict[str, Any] = {"target": target, "seed": seed, "early_log": early_log.tolist(),
                           "values": [v for v in cold.values]}  # fmt: skip
    for arm in ("real", "shuffled"):
        prior = _prior(paths, sources, args, seed, "unrelated" if arm == "shuffled" else "warm")
        summary = summarize_prior(prior, table_rows(table, space, prior), "copula")
        if summary is None:
            out[arm] = None
            continue
        models = prior_models(table, features, summary, args.nulls, 256, 64)
        x = features[early]
        full = models.prior.mean(features)

        def quality(row: int) -> tuple[float, float]:
            rec = landscape.entries.get(space.key(configs_at(space, table, [row])[0]))
            if rec is None or rec.mean_ms is None or rec.failure is not None:
                return 0.0, 1.0
            return optimum / rec.mean_ms, float(np.searchsorted(ordered, rec.mean_ms) / len(ordered))

        out[arm] = {
            "prior_mean": models.prior.mean(x).tolist(),
            "null_means": [m.mean(x).tolist() for m in models.nulls],
            "seeds": [quality(r) for r in summary.best(3)],
            "model_best": [quality(int(r)) for r in np.argsort(full, kind="stable")[:3]],
        }
    return out


def _gate(run: dict[str, Any], arm: str, bar: float, optimum: float) -> tuple[int | None, int | None]:
    """(evaluation at which the default gate admits the prior, at which a probe at ``bar`` does)."""
    entry = run[arm]
    early = np.array(run["early_log"])
    nulls = np.array(entry["null_means"])[:8]
    z = calibrated_agreement(np.array(entry["prior_mean"]), nulls, early, GATE_MIN)
    successes = [i + 1 for i, v in enumerate(run["values"]) if v is not None]
    direct = probe = None
    for k, value in enumerate(z.tolist(), start=GATE_MIN):
        if value < 0:
            break
        if value >= bar:
            direct = successes[k - 1]  # the evaluation after which the gate admits the prior
            fraction = entry["seeds"][0][0]
            if fraction > 0 and math.log(optimum / fraction) < early[:k].min():
                probe = direct + 1
            break
    return direct, probe


def summary(path: Path, landscapes: Path, bars: list[float]) -> None:
    runs = json.loads(gzip.decompress(path.read_bytes()))["runs"]
    optimum = {}
    for p in sorted(landscapes.glob("*.json*")):
        entries = load_landscape(p).entries.values()
        optimum[landscape_name(p)] = min(r.mean_ms for r in entries if r.mean_ms is not None and r.failure is None)
    targets = sorted({r["target"] for r in runs})
    for bar in bars:
        print(f"\nbar {bar}: per target, real / shuffled prior, admitted of {len(runs) // len(targets)} runs "
              "(median evaluation)")  # fmt: skip
        print("| target | probe on target: fraction / percentile (median) | admitted at the bar: real / shuffled "
              "| probe confirmed: real / shuffled |")  # fmt: skip
        print("|---|---|---|---|")
        totals = np.zeros(4, dtype=int)
        for t in targets:
            mine = [r for r in runs if r["target"] == t and r["real"] and r["shuffled"]]
            cells = []
            for which in (0, 1):
                for arm in ("real", "shuffled"):
                    at = [_gate(r, arm, bar, optimum[t])[which] for r in mine]
                    hit = [a for a in at if a is not None]
                    cells.append(f"{len(hit)} ({statistics.median(hit):g})" if hit else "0")
                    totals[2 * which + (arm == "shuffled")] += len(hit)
            seeds = np.array([r["real"]["seeds"][0] for r in mine])
            print(f"| {t} | {np.median(seeds[:, 0]):.2f} / {np.median(seeds[:, 1]):.3f} | {cells[0]} / {cells[1]} "
                  f"| {cells[2]} / {cells[3]} |")  # fmt: skip
        print(f"| all | | {totals[0]} / {totals[1]} | {totals[2]} / {totals[3]} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--landscapes", type=Path, required=True)
    parser.add_argument("--summary", type=Path, help="a report of this script: print the tables")
    parser.add_argument("--bar", type=float, action="append")
    parser.add_argument("--only", action="append")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nulls", type=int, default=32)
    parser.add_argument("--early", type=int, default=20)
    parser.add_argument("--early-budget", type=int, default=24, help="cold evaluations replayed (failures included)")
    parser.add_argument("--prior-strategy", default="random")
    parser.add_argument("--prior-trials", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.summary:
        summary(args.summary, args.landscapes, args.bar or [2.0])
        return
    if args.json is None:
        parser.error("--json is required")
    paths = {landscape_name(p): p for p in sorted(args.landscapes.glob("*.json*"))}
    families = by_family(paths)
    targets = [t for t in paths if not args.only or t in args.only]
    jobs = [(t, paths, [s for s in families[family_of(t)] if s != t], args.seed + r, args)
            for t in targets for r in range(args.repeats)]  # fmt: skip
    with ProcessPoolExecutor(args.jobs) as pool:
        results = []
        for result in pool.map(_task, jobs):
            print(result["target"], result["seed"], flush=True)
            results.append(result)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.json, "wt") if args.json.suffix == ".gz" else args.json.open("w") as f:
        json.dump({"settings": {"repeats": args.repeats, "nulls": args.nulls, "early": args.early,
                                "prior_strategy": args.prior_strategy, "prior_trials": args.prior_trials},
                   "runs": results}, f)  # fmt: skip


if __name__ == "__main__":
    main()
