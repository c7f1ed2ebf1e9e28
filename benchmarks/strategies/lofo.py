"""Leave-one-family-out choice of the default strategy's hyperparameters (issue 17, item 2).

Input: a grid run of compare_all.py (``--no-kernel-tuner --modes keep --budget 100 --farm
'bayes:KEY=VALUE,...' ...``; its ``all_traces.json``). Every variant's standardized score
(make_tables.py ``scores``) is averaged per family (tuner/strategy_benchmark/families.py), then:

- *all-in*: the variant with the best mean over the five families (each family weighs the same,
  so the family with four landscapes does not outvote the one with three);
- *held out*, per family F: the variant with the best mean over the other four families, scored
  on F. A default fitted to its benchmark would show as held-out scores below the all-in ones.

The target is a held-out score within 0.01 of the all-in score on every family.

Usage:
    python benchmarks/strategies/lofo.py GRID_FOLDER LANDSCAPES_FOLDER [--json OUT.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
from pathlib import Path
from typing import Any

from make_tables import scores

from kernelfarm.tuner.strategy_benchmark.families import by_family
from kernelfarm.tuner.strategy_benchmark.metrics import summarize


def family_means(per_landscape: dict[str, float], families: dict[str, list[str]]) -> dict[str, float]:
    return {f: statistics.fmean(per_landscape[n] for n in names) for f, names in families.items()}


def choose(fam: dict[str, dict[str, float]], families: list[str]) -> str:
    """The variant with the best mean over ``families`` (ties: the first listed)."""
    return max(fam, key=lambda v: statistics.fmean(fam[v][f] for f in families))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("grid", type=Path)
    parser.add_argument("landscapes", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    path = args.grid / "all_traces.json"
    if not path.exists():  # kept gzipped in the repository
        path = path.with_name(path.name + ".gz")
    traces = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
    score = scores(args.grid / "all_traces.json", args.landscapes)["keep"]
    names = sorted(score)
    families = by_family(names)
    variants = list(next(iter(score.values())))
    variants = [v for v in variants if all(v in score[n] for n in names)]
    per_variant = {v: {n: score[n][v] for n in names} for v in variants}
    fam = {v: family_means(per_variant[v], families) for v in variants}
    all_in = choose(fam, list(families))
    rows: list[dict[str, Any]] = []
    for held in families:
        others = [f for f in families if f != held]
        pick = choose(fam, others)
        rows.append({
            "family": held, "chosen_on_others": pick, "held_out_score": fam[pick][held],
            "all_in_choice": all_in, "all_in_score": fam[all_in][held],
            "difference": fam[pick][held] - fam[all_in][held],
        })  # fmt: skip
    details: dict[str, Any] = {}
    for v in variants:
        frac, n95 = {}, {}
        for n in names:
            meta = traces["meta"][n]
            runs = traces["traces"]["keep"][n][v]
            summary = summarize([r["trace"] for r in runs], meta["optimum_ms"], 100)
            frac[n], n95[n] = summary.frac_at["100"], summary.n95_median
        details[v] = {"score": per_variant[v], "family_score": fam[v], "frac_at_100": frac, "n95_median": n95,
                      "repeats": min(len(traces["traces"]["keep"][n][v]) for n in names)}  # fmt: skip
    print("| variant | repeats | score (family mean) | " + " | ".join(families) + " | frac@100 (mean) "
          "| landscapes frac@100 >= 0.97 | landscapes evals to 0.95 <= 60 |")  # fmt: skip
    print("|---|---|---|" + "---|" * len(families) + "---|---|---|")
    for v in sorted(variants, key=lambda v: -statistics.fmean(fam[v].values())):
        d = details[v]
        ok95 = sum(1 for n in names if d["n95_median"][n] is not None and d["n95_median"][n] <= 60)
        print(f"| {v} | {d['repeats']} | {statistics.fmean(fam[v].values()):.3f} | "
              + " | ".join(f"{fam[v][f]:.3f}" for f in families)
              + f" | {statistics.fmean(d['frac_at_100'].values()):.3f} "
              f"| {sum(1 for x in d['frac_at_100'].values() if x >= 0.97)} / {len(names)} "
              f"| {ok95} / {len(names)} |")  # fmt: skip
    print()
    print("| held-out family | chosen on the other four | held-out score | all-in choice | all-in score | difference |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['family']} | {r['chosen_on_others']} | {r['held_out_score']:.3f} | {r['all_in_choice']} "
              f"| {r['all_in_score']:.3f} | {r['difference']:+.3f} |")  # fmt: skip
    held_mean = statistics.fmean(r["held_out_score"] for r in rows)
    all_in_mean = statistics.fmean(r["all_in_score"] for r in rows)
    print(f"\nmean over families: held out {held_mean:.3f}, all-in {all_in_mean:.3f}, "
          f"difference {held_mean - all_in_mean:+.3f}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"families": families, "all_in": all_in, "lofo": rows,
                                         "mean_held_out": held_mean, "mean_all_in": all_in_mean, "variants": details},
                                        indent=1) + "\n")  # fmt: skip


if __name__ == "__main__":
    main()
