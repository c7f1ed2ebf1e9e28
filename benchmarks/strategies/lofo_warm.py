"""Leave-one-family-out choice of the warm-start gate's settings (issue 17: thresholds are not
chosen on all nineteen targets at once).

Input: warm_start_pairs.py reports, one per variant (``LABEL=REPORT.json``), and a report with
the cold arm (``--cold``; same seeds). Per target, from the median evaluations to 0.95 (a median
past the budget counts as budget + 1):

- *warm*: the median with the real prior (the other GPUs' trials of the same kernel);
- *harm*: how much later than cold the job is with the unrelated (shuffled) prior, 0 where it is
  not later (the issue: an unrelated prior must not hurt).

The choice on a set of families: among the variants whose summed harm there is no more than the
reference's (``--reference``, the gate it would replace), the one with the lowest summed warm
median (ties: the first listed). *All-in*: chosen on the five families; *held out*, per family
F: chosen on the other four, scored on F.

``--paired``: *harm* is instead the mean over the target's runs of (unrelated - cold) with the same
seed (reports with ``n95_runs``, paired_harm.py), signed: a median moved up by chance is not counted
as cost while one moved down is dropped (issue 17, tenth session: a gate that keeps a probe's
measurement moved the unrelated medians up on 9 targets and down on 7, summed harm 21.5 against a
signed -0.5).

Usage:
    python benchmarks/strategies/lofo_warm.py --cold COLD.json --reference LABEL \
        LABEL=REPORT.json [LABEL=REPORT.json ...] [--paired] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TypedDict

from paired_harm import runs

from kernelfarm.tuner.strategy_benchmark.families import by_family


class Score(TypedDict):
    """A choice scored on the held-out family."""

    warm_sum: float
    warm_le_20: int
    targets: int
    harm_sum: float


class Fold(TypedDict):
    """One held-out family: the choice made without it and the all-in choice, each scored on it."""

    family: str
    chosen_on_others: str
    all_in_choice: str
    held_out: Score
    all_in: Score


def medians(report: dict[str, Any], arm: str) -> dict[str, float]:
    """Median evaluations to 0.95 per target (budget + 1 where the median run missed it)."""
    budget = int(report["settings"]["budget"])
    out = {}
    for target, entry in report["landscapes"].items():
        if arm in entry:
            value = entry[arm]["n95_median"]
            out[target] = float(budget + 1) if value is None else float(value)
    return out


def merged(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """One report from several runs of the same variant (``LABEL=A.json,B.json``: the warm arm
    from one, the unrelated arm's runs from another): each target's arm from the first that has it."""
    out: dict[str, Any] = {"settings": reports[0]["settings"], "landscapes": {}}
    for report in reports:
        for target, entry in report["landscapes"].items():
            mine = out["landscapes"].setdefault(target, {})
            for arm, value in entry.items():
                mine.setdefault(arm, value)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variants", nargs="+", help="LABEL=REPORT.json[,REPORT.json ...]")
    parser.add_argument("--cold", type=Path, required=True, help="a report with the cold arm")
    parser.add_argument("--reference", required=True, help="the label whose harm bounds the choice")
    parser.add_argument("--paired", action="store_true", help="harm: mean paired difference, run by run")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cold_report = json.loads(args.cold.read_text())
    cold = medians(cold_report, "cold")
    cold_runs = runs(cold_report, "cold")
    warm: dict[str, dict[str, float]] = {}
    harm: dict[str, dict[str, float]] = {}
    for item in args.variants:
        label, _, paths = item.partition("=")
        report = merged([json.loads(Path(path).read_text()) for path in paths.split(",")])
        warm[label] = medians(report, "warm")
        if args.paired:
            harm[label] = {t: float((r - cold_runs[t]).mean()) for t, r in runs(report, "unrelated").items()}
        else:
            harm[label] = {t: max(0.0, v - cold[t]) for t, v in medians(report, "unrelated").items()}
    labels = list(warm)
    targets = sorted(cold)
    families = by_family(targets)

    def total(table: dict[str, float], fams: list[str]) -> float:
        return sum(table[t] for f in fams for t in families[f])

    def choose(fams: list[str]) -> str:
        bound = total(harm[args.reference], fams)
        allowed = [v for v in labels if total(harm[v], fams) <= bound + 1e-9]
        return min(allowed, key=lambda v: total(warm[v], fams))

    def hits(v: str, fams: list[str]) -> int:
        return sum(1 for f in fams for t in families[f] if warm[v][t] <= 20)

    def score(v: str, held: str) -> Score:
        return {"warm_sum": total(warm[v], [held]), "warm_le_20": hits(v, [held]),
                "targets": len(families[held]), "harm_sum": total(harm[v], [held])}  # fmt: skip

    everything = list(families)
    all_in = choose(everything)
    print("| variant | warm median, summed | targets warm <= 20 | harm of the unrelated prior, summed (targets) |")
    print("|---|---|---|---|")
    for v in labels:
        n_harm = sum(1 for t in targets if harm[v][t] > 0)
        print(f"| {v} | {total(warm[v], everything):g} | {hits(v, everything)} / {len(targets)} "
              f"| {total(harm[v], everything):g} ({n_harm}) |")  # fmt: skip
    print()
    print("| held-out family | chosen on the other four | held out: warm summed / <= 20 / harm "
          "| all-in choice | all-in: warm summed / <= 20 / harm |")  # fmt: skip
    print("|---|---|---|---|---|")
    rows: list[Fold] = []
    for held in families:
        pick = choose([f for f in families if f != held])
        row: Fold = {"family": held, "chosen_on_others": pick, "all_in_choice": all_in,
                     "held_out": score(pick, held), "all_in": score(all_in, held)}  # fmt: skip
        rows.append(row)
        cells = [f"{c['warm_sum']:g} / {c['warm_le_20']} of {c['targets']} / {c['harm_sum']:g}"
                 for c in (row["held_out"], row["all_in"])]  # fmt: skip
        print(f"| {held} | {pick} | {cells[0]} | {all_in} | {cells[1]} |")
    held_warm = sum(r["held_out"]["warm_sum"] for r in rows)
    held_hits = sum(r["held_out"]["warm_le_20"] for r in rows)
    held_harm = sum(r["held_out"]["harm_sum"] for r in rows)
    print(f"\nheld out over all folds: warm summed {held_warm:g}, <= 20 on {held_hits} / {len(targets)}, "
          f"harm {held_harm:g}; all-in ({all_in}): {total(warm[all_in], everything):g}, "
          f"{hits(all_in, everything)} / {len(targets)}, {total(harm[all_in], everything):g}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"all_in": all_in, "folds": rows, "warm": warm, "harm": harm,
                                         "cold": cold, "reference": args.reference}, indent=2) + "\n")  # fmt: skip


if __name__ == "__main__":
    main()
