"""Variants of a grid compared on more seeds than one grid run holds, run by run.

Why: the search's runs are bimodal (a run finds the optimum's region or settles short of it), so
with 10 seeds one run that flips moves a landscape's mean frac@100 by 0.03 and a family's score by
as much as a real change. This pools compare_all.py grid runs that hold the same variants on other
seeds (``--seed 10 --repeats 20`` next to the usual ``--repeats 10``), keeps each (landscape,
variant, seed) once, and reports per variant, over the seeds every input gives it:

- the standardized score per family (make_tables.py / lofo.py's score, on the pooled runs);
- mean frac@100 and median evaluations to 0.95 per landscape, and how many landscapes meet
  issue 17's targets against ``--kernel-tuner`` (frac@100 >= max(0.97, best Kernel Tuner), median
  evaluations to 0.95 <= 60);
- leave-one-family-out among the pooled variants (lofo.py's rule on the pooled scores);
- against ``--base``, paired by seed: the mean difference of each run's standardized score per
  family, with a 95 % bootstrap interval over seeds (the seeds resampled, the same for every
  landscape of the family).

Usage:
    python benchmarks/strategies/pooled_seeds.py LANDSCAPES GRID_FOLDER [GRID_FOLDER ...] --base LABEL
        [--kernel-tuner REPORT.json] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np
from lofo import choose
from make_tables import _landscape_times
from merge_grids import read_traces

from kernelfarm.tuner.strategy_benchmark.families import by_family
from kernelfarm.tuner.strategy_benchmark.metrics import summarize
from kernelfarm.tuner.strategy_benchmark.standardized import random_baseline, standardized_score

BUDGET = 100
BOOTSTRAP = 2000


def pooled_runs(folders: list[Path]) -> tuple[dict[str, Any], dict[str, dict[str, dict[int, list[float | None]]]]]:
    """(meta per landscape, landscape -> label -> seed -> trace), each seed taken from the first
    folder that holds it."""
    meta: dict[str, Any] = {}
    runs: dict[str, dict[str, dict[int, list[float | None]]]] = {}
    for folder in folders:
        data = read_traces(folder)
        meta.update(data["meta"])
        for name, per_label in data["traces"]["keep"].items():
            for label, items in per_label.items():
                into = runs.setdefault(name, {}).setdefault(label, {})
                for item in items:
                    into.setdefault(int(item["seed"]), item["trace"])
    return meta, runs


def kernel_tuner_bars(path: Path | None) -> dict[str, tuple[float, float]]:
    """Per landscape: (best Kernel Tuner frac@100, best median evaluations to 0.95) of a report."""
    if path is None:
        return {}
    report = json.loads(path.read_text())
    bars: dict[str, tuple[float, float]] = {}
    for name, entry in report["landscapes"].items():
        kt = {s: r for s, r in entry["strategies"].items() if s.startswith("kt:")}
        frac = max((r["frac_at"]["100"] for r in kt.values()), default=0.0)
        n95 = min((r["n95_median"] for r in kt.values() if r["n95_median"] is not None), default=float("inf"))
        bars[name] = (frac, n95)
    return bars


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("landscapes", type=Path)
    parser.add_argument("grids", type=Path, nargs="+")
    parser.add_argument("--base", required=True)
    parser.add_argument("--variant", action="append", help="variants to compare (default: all; the base is added)")
    parser.add_argument("--kernel-tuner", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    meta, runs = pooled_runs(args.grids)
    names = sorted(runs)
    labels = [v for v in runs[names[0]] if all(v in runs[n] for n in names)]
    if args.variant:
        labels = [v for v in labels if v in args.variant or v == args.base]
    seeds = {v: sorted(set.intersection(*(set(runs[n][v]) for n in names))) for v in labels}
    common = sorted(set.intersection(*(set(s) for s in seeds.values())))
    families = by_family(names)
    bars = kernel_tuner_bars(args.kernel_tuner)
    per_run: dict[str, dict[str, np.ndarray]] = {v: {} for v in labels}  # label -> landscape -> score per seed
    report: dict[str, Any] = {"seeds": common, "base": args.base, "variants": {}}
    for name in names:
        times = _landscape_times(args.landscapes, name, keep=True)
        base_curve = random_baseline(times, BUDGET)
        worst = max(t for t in times if t is not None)
        optimum = min(t for t in times if t is not None)
        for v in labels:
            traces = [runs[name][v][s] for s in common]
            per_run[v][name] = np.array([standardized_score([t], base_curve, optimum, worst) for t in traces])
    rng = np.random.default_rng(0)
    draws = rng.integers(0, len(common), size=(BOOTSTRAP, len(common)))
    print(f"{len(common)} seeds ({common[0]}..{common[-1]}), budget {BUDGET}, failed configs kept\n")
    print("| variant | score (family mean) | " + " | ".join(families) + " | frac@100 target | evals to 0.95 <= 60 |")
    print("|---|---|" + "---|" * len(families) + "---|---|")
    for v in labels:
        fam = {}
        for f, members in families.items():
            fam[f] = statistics.fmean(float(per_run[v][n].mean()) for n in members)
        landscape_rows = {}
        hits_frac = hits_n95 = 0
        for n in names:
            summary = summarize([runs[n][v][s] for s in common], meta[n]["optimum_ms"], BUDGET)
            frac, n95 = summary.frac_at["100"], summary.n95_median
            assert frac is not None  # None only past the budget, and BUDGET is 100
            bar = max(0.97, bars.get(n, (0.0, 0.0))[0])
            hits_frac += frac >= bar - 1e-9
            hits_n95 += n95 is not None and n95 <= 60
            landscape_rows[n] = {"frac_at_100": frac, "n95_median": n95}
        paired = {}
        if v != args.base:
            for f, members in families.items():
                diff = np.mean([per_run[v][n] - per_run[args.base][n] for n in members], axis=0)  # per seed
                boot = diff[draws].mean(axis=1)
                paired[f] = [float(diff.mean()), float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))]
        mean = statistics.fmean(fam.values())
        cells = " | ".join(f"{fam[f]:.3f}" for f in families)
        print(f"| {v} | {mean:.3f} | {cells} | {hits_frac} / {len(names)} | {hits_n95} / {len(names)} |")
        report["variants"][v] = {"score": mean, "family_score": fam, "landscapes": landscape_rows,
                                 "paired_vs_base": paired, "frac_target_hits": hits_frac,
                                 "n95_target_hits": hits_n95}  # fmt: skip
    print(f"\nPaired with {args.base}, seed by seed: mean difference of the standardized score [95 % interval]\n")
    print("| variant | " + " | ".join(families) + " |")
    print("|---|" + "---|" * len(families))
    for v in labels:
        paired = report["variants"][v]["paired_vs_base"]
        if paired:
            cells = " | ".join(f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]" for m, lo, hi in paired.values())
            print(f"| {v} | {cells} |")
    fam_scores = {v: report["variants"][v]["family_score"] for v in labels}
    all_in = choose(fam_scores, list(families))
    print(f"\nLeave-one-family-out over these {len(labels)} variants (all-in choice: {all_in})\n")
    print("| held-out family | chosen on the other four | held-out score | all-in score | difference |")
    print("|---|---|---|---|---|")
    report["lofo"] = []
    for held in families:
        pick = choose(fam_scores, [f for f in families if f != held])
        diff = fam_scores[pick][held] - fam_scores[all_in][held]
        print(f"| {held} | {pick} | {fam_scores[pick][held]:.3f} | {fam_scores[all_in][held]:.3f} | {diff:+.3f} |")
        report["lofo"].append({"family": held, "chosen_on_others": pick, "difference": diff})
    kt_head = " best Kernel Tuner frac@100 / evals to 0.95 |" if bars else ""
    print("\n| landscape |" + kt_head + " " + " | ".join(labels) + " |")
    print("|---|" + "---|" * (len(labels) + bool(bars)))
    for n in names:
        row_cells = [f"{bars[n][0]:.3f} / {bars[n][1]:g}".replace("inf", ">100")] if bars else []
        for v in labels:
            row = report["variants"][v]["landscapes"][n]
            evals = ">100" if row["n95_median"] is None else f"{row['n95_median']:g}"
            bar = max(0.97, bars[n][0]) if bars else 0.97
            misses = (row["frac_at_100"] < bar - 1e-9) + (row["n95_median"] is None or row["n95_median"] > 60)
            row_cells.append(f"{row['frac_at_100']:.3f} / {evals}" + (" (miss)" if bars and misses else ""))
        print(f"| {n} | " + " | ".join(row_cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
