"""Issue 17's cold targets with their sampling uncertainty: is a miss a miss, or a seed count?

The search's runs are bimodal (a run finds the optimum's region or settles at 0.7-0.9 of it), so
over 30 seeds a landscape's mean frac@100 has a 95 % interval of about ±0.03, and two numerical
libraries that round one GP fit differently give 0.947 and 0.967 on convolution_milo_A4000's same
30 seeds (sixteenth session). This reads one grid run (compare_all.py's ``all_traces.json``, failed
configs kept) and reports per landscape and strategy, over its seeds:

- mean frac@100 with a 95 % bootstrap interval (the seeds resampled), and the share of runs that
  end within 0.95;
- median evaluations to 0.95 (a run that never gets there counts as past the budget) with a 95 %
  bootstrap interval;
- the verdict on each target, frac@100 >= max(0.97, best Kernel Tuner) and median evaluations to
  0.95 <= 60: "met" or "missed" when the whole interval is on one side of the bar, "open" when the
  interval contains it.

``--first N``: also the same figures on the first N seeds only (the number the earlier tables used).
``--seeds-from S``: only the runs with seed S or later (in the ``--against`` table too). Seeds 0-29
are the ones the default's options were chosen on; the runs from seed 30 on measure it on seeds
nobody looked at while choosing.
``--against BASE_FOLDER``: also, per landscape, each strategy's frac@100 minus that of the one
strategy of another grid run on the same seeds (run by run, mean with a 95 % bootstrap interval).

Usage:
    python benchmarks/strategies/target_intervals.py GRID_FOLDER [--kernel-tuner REPORT.json]
        [--first 30] [--seeds-from 30] [--resamples 10000] [--against BASE_FOLDER] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from merge_grids import read_traces
from pooled_seeds import kernel_tuner_bars

from kernelfarm.tuner.strategy_benchmark.metrics import evaluations_to, fraction_curve

BUDGET = 100
FRAC_FLOOR = 0.97
EVALS_BAR = 60.0


def interval(values: np.ndarray, statistic: Any, resamples: int, rng: np.random.Generator) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of ``statistic`` over ``values`` resampled."""
    picks = rng.integers(len(values), size=(resamples, len(values)))
    stats = statistic(values[picks], axis=1)
    # inverted_cdf picks resampled values, never interpolates: a median past the budget (inf) stays one
    low, high = np.quantile(stats, [0.025, 0.975], method="inverted_cdf")
    return float(low), float(high)


def verdict(low: float, high: float, bar: float, higher_is_better: bool) -> str:
    if higher_is_better:
        return "met" if low >= bar else "missed" if high < bar else "open"
    return "met" if high <= bar else "missed" if low > bar else "open"


def summarize_runs(traces: list[Any], optimum: float, resamples: int, seed: int) -> dict[str, Any]:
    curves = [fraction_curve(t, optimum, BUDGET) for t in traces]
    final = np.array([c[-1] for c in curves])
    hits = [evaluations_to(c, 0.95) for c in curves]
    evals = np.array([h if h is not None else math.inf for h in hits], dtype=float)
    rng = np.random.default_rng(seed)
    frac_ci = interval(final, np.mean, resamples, rng)
    evals_ci = interval(evals, np.median, resamples, rng)
    return {
        "runs": len(traces),
        "frac100": float(final.mean()),
        "frac100_ci": frac_ci,
        "within_095": float((final >= 0.95).mean()),
        "evals095": float(np.median(evals)),
        "evals095_ci": evals_ci,
    }


def final_fractions(runs: list[Any], optimum: float) -> dict[int, float]:
    """Seed -> fraction of the optimum after the budget."""
    return {r["seed"]: fraction_curve(r["trace"], optimum, BUDGET)[-1] for r in runs}


def paired_table(data: dict[str, Any], base: dict[str, Any], resamples: int, seeds_from: int = 0) -> list[str]:
    """Per landscape and strategy: frac@100 minus the base run's, paired by seed (``--against``),
    over the seeds both runs have from ``seeds_from`` on."""
    lines = ["| landscape | strategy | against | seeds | frac@100 difference [95 %] |", "|---|---|---|---|---|"]
    for name, strategies in sorted(data["traces"]["keep"].items()):
        if name not in base["traces"]["keep"]:
            continue
        optimum = data["meta"][name]["optimum_ms"]
        (base_label, base_runs), *rest = base["traces"]["keep"][name].items()
        if rest:
            raise SystemExit(f"--against: {name} has more than one strategy in the base run")
        reference = final_fractions(base_runs, optimum)
        for label, runs in sorted(strategies.items()):
            mine = final_fractions(runs, optimum)
            seeds = sorted(s for s in set(mine) & set(reference) if s >= seeds_from)
            diff = np.array([mine[s] - reference[s] for s in seeds])
            lo, hi = interval(diff, np.mean, resamples, np.random.default_rng(0))
            cell = f"{diff.mean():+.3f} [{lo:+.3f}, {hi:+.3f}]"
            lines.append(f"| {name} | {label} | {base_label} | {len(seeds)} | {cell} |")
    return lines


def _evals(value: float) -> str:
    return f">{BUDGET}" if math.isinf(value) else f"{value:g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("grid", type=Path)
    parser.add_argument("--kernel-tuner", type=Path)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--seeds-from", type=int, default=0)
    parser.add_argument("--resamples", type=int, default=10000)
    parser.add_argument("--against", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.first < 0 or args.seeds_from < 0 or args.resamples < 100:
        parser.error("--first and --seeds-from must be 0 or more and --resamples at least 100")
    try:
        data = read_traces(args.grid)
        base = read_traces(args.against) if args.against else None
        bars = kernel_tuner_bars(args.kernel_tuner)
    except (OSError, ValueError, KeyError) as error:
        parser.error(f"unreadable input (a grid's all_traces.json(.gz), --against, --kernel-tuner): {error}")
    report: dict[str, Any] = {}
    print(
        "| landscape | strategy | seeds | frac@100 [95 %] | runs within 0.95 | bar | frac@100 target | "
        "evals to 0.95 [95 %] | evals target |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    label_all = f"from seed {args.seeds_from}" if args.seeds_from else "all"
    for name, strategies in sorted(data["traces"]["keep"].items()):
        optimum = data["meta"][name]["optimum_ms"]
        frac_bar = max(FRAC_FLOOR, bars.get(name, (0.0, math.inf))[0])
        for label, runs in sorted(strategies.items()):
            runs = sorted((r for r in runs if r["seed"] >= args.seeds_from), key=lambda r: r["seed"])
            if not runs:
                continue
            subsets = [(label_all, runs)] + ([(f"first {args.first}", runs[: args.first])] if args.first else [])
            for which, chosen in subsets:
                s = summarize_runs([r["trace"] for r in chosen], optimum, args.resamples, seed=0)
                lo, hi = s["frac100_ci"]
                elo, ehi = s["evals095_ci"]
                s["frac_target"] = verdict(lo, hi, frac_bar, higher_is_better=True)
                s["evals_target"] = verdict(elo, ehi, EVALS_BAR, higher_is_better=False)
                report.setdefault(name, {}).setdefault(label, {})[which] = s
                print(
                    f"| {name} | {label} | {which} ({s['runs']}) | {s['frac100']:.3f} [{lo:.3f}, {hi:.3f}] | "
                    f"{s['within_095']:.2f} | {frac_bar:.3f} | {s['frac_target']} | {_evals(s['evals095'])} "
                    f"[{_evals(elo)}, {_evals(ehi)}] | {s['evals_target']} |"
                )
    if base is not None:
        print()
        print("\n".join(paired_table(data, base, args.resamples, args.seeds_from)))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
