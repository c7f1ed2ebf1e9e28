"""What an unrelated prior costs, run by run: each run with the shuffled prior against the cold run
of the same seed (warm_start_pairs.py reports with ``n95_runs``; a run that missed 0.95 within the
budget counts as budget + 1).

Why not the medians alone: lofo_warm.py's *harm* sums, per target, how much later the unrelated
arm's median is than the cold arm's, and 0 where it is earlier. A gate that changes an unrelated
job's course at all (a probe it keeps, say) moves each median up or down by chance, and the sum
of the ups counts the chance as cost. Paired differences show both directions: their mean over
all runs, with a bootstrap interval, is what the prior costs on average.

Each variant is ``LABEL=REPORT.json`` (its ``unrelated`` arm) or ``LABEL=REPORT.json@ARM`` (another
arm, e.g. ``unrelated_random``). ``--cold REPORT.json@ARM`` pairs against another arm than
``cold``: a warm-start option against the default's warm runs, say (``--cold default.json@warm
option=option.json@warm``). ``--skip TARGET`` leaves a target out (pnpoly_RTX_Titan, whose runs
mostly miss and so differ by chance in the budget + 1 they count as). ``--large N`` splits the
summed cost into the runs that differ by N or more (listed: where a prior sent a job elsewhere)
and the rest (the hidden probes' routine cost).

Usage:
    python benchmarks/strategies/paired_harm.py --cold COLD.json[@ARM] LABEL=REPORT.json[@ARM] [...] \
        [--large 3] [--skip NAME] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np


def runs(report: dict[str, Any], arm: str) -> dict[str, np.ndarray]:
    """Per target, each run's evaluations to 0.95 (budget + 1 where it missed)."""
    miss = int(report["settings"]["budget"]) + 1
    out = {}
    for target, entry in report["landscapes"].items():
        if arm in entry and "n95_runs" in entry[arm]:
            out[target] = np.array([miss if n is None else n for n in entry[arm]["n95_runs"]], dtype=float)
    return out


def bootstrap_mean(values: np.ndarray, draws: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """95 % interval of the mean by resampling runs."""
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), (draws, len(values)))].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variants", nargs="+", help="LABEL=REPORT.json[@ARM] (default arm: unrelated)")
    parser.add_argument(
        "--cold", required=True, help="REPORT.json[@ARM]: the runs each variant is paired with (default arm: cold)"
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--large", type=int, default=0,
        help="also split each variant's summed cost into runs that differ by at least this many "
        "evaluations (listed) and the rest (the routine cost: a hidden probe is 1 or 2)",
    )  # fmt: skip
    parser.add_argument("--skip", action="append", default=[], help="a target to leave out (repeatable)")
    args = parser.parse_args()

    def arm_runs(path: str, arm: str) -> dict[str, np.ndarray]:
        try:
            found = runs(json.loads(Path(path).read_text()), arm)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            parser.error(f"{path}: not a warm_start_pairs.py report ({exc})")
        if not found:
            parser.error(f"{path} has no {arm!r} runs")
        return found

    cold_path, _, cold_arm = args.cold.partition("@")
    cold = arm_runs(cold_path, cold_arm or "cold")
    unknown = sorted(set(args.skip) - set(cold))
    if unknown:
        parser.error(f"--skip: {unknown} not among the targets of {cold_path}")
    labels, reports = [], []
    for spec in args.variants:
        label, sep, path = spec.partition("=")
        if not sep:
            parser.error(f"{spec!r}: expected LABEL=REPORT.json[@ARM]")
        path, _, arm = path.partition("@")
        labels.append(label)
        reports.append(arm_runs(path, arm or "unrelated"))
    targets = [t for t in cold if t not in args.skip and all(t in r for r in reports)]
    baseline = f"the {cold_arm} arm of {cold_path}" if cold_arm else "cold"
    print(f"mean evaluations to 0.95 minus {baseline}, same seed (runs later / earlier)\n")
    print("| target | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    summary: dict[str, Any] = {"targets": {}, "all": {}}
    for t in targets:
        cells = []
        for label, report in zip(labels, reports, strict=True):
            diff = report[t] - cold[t]
            cells.append(f"{diff.mean():+.1f} ({int((diff > 0).sum())} / {int((diff < 0).sum())})")
            summary["targets"].setdefault(t, {})[label] = {
                "mean": float(diff.mean()), "later": int((diff > 0).sum()), "earlier": int((diff < 0).sum())
            }  # fmt: skip
        print(f"| {t} | " + " | ".join(cells) + " |")
    cells = []
    for label, report in zip(labels, reports, strict=True):
        diff = np.concatenate([report[t] - cold[t] for t in targets])
        low, high = bootstrap_mean(diff)
        cells.append(f"**{diff.mean():+.2f}** [{low:+.2f}, {high:+.2f}]")
        summary["all"][label] = {"mean": float(diff.mean()), "ci95": [low, high], "runs": len(diff)}
    print("| **all runs: mean [95 % bootstrap interval]** | " + " | ".join(cells) + " |")
    if args.large > 0:
        for label, report in zip(labels, reports, strict=True):
            large = [(t, seed, int(cold[t][seed]), int(report[t][seed])) for t in targets
                     for seed in np.flatnonzero(np.abs(report[t] - cold[t]) >= args.large).tolist()]  # fmt: skip
            total = sum(float((report[t] - cold[t]).sum()) for t in targets)
            in_large = sum(after - before for _, _, before, after in large)
            print(f"\n{label}: summed {total:+.0f} evaluations; {len(large)} runs differ by {args.large} or more "
                  f"({in_large:+d} together), the other runs {total - in_large:+.0f}")  # fmt: skip
            for t, seed, before, after in large:
                print(f"  {t} seed {seed}: cold {before}, with the prior {after}")
            summary["all"][label]["large"] = {"runs": len(large), "sum": in_large, "rest": total - in_large}
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
