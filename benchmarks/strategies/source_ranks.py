"""How far down the other GPUs' rankings a target's needles are: a reference for what a ranking
transferred from them can give warm start (issue 17, nineteenth session).

A warm job's prior is what the other GPUs of the family measured: three or four 100-trial jobs.
This asks the most favourable version of that question. Take the other GPUs' *whole recordings*
(every config measured), order the target's space by what they say (each source alone, and their
consensus: the mean, the geometric mean and the minimum of the sources' fractions of their own
optimum), and read where the first needle comes: the first config within 0.95 of the target's
optimum. A job that measured the configs in that order, from its first evaluation, reaches 0.95 at
that rank. Ties are broken in the needle's favour (the rank is 1 + the configs strictly ahead of it),
and a config a source did not measure or that failed there counts as fraction 0.

It is a reference, not a bound: the warm job also learns from its own measurements (the prior's
scale is fitted to them), so it can beat a source's order; and it spends its first ``GATE_MIN``
evaluations (4) on the cold design before the gate lets the prior in. ``--warm REPORT`` adds the
median evaluations to 0.95 of a warm_start_pairs.py report's warm arm for comparison.

Usage:
    python benchmarks/strategies/source_ranks.py LANDSCAPES [--warm REPORT.json] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
from paired_harm import runs

from kernelfarm.core.errors import KernelfarmError
from kernelfarm.core.landscape import load_landscape
from kernelfarm.tuner.strategy_benchmark.families import by_family
from kernelfarm.tuner.strategy_benchmark.runner import landscape_name

NEEDLE = 0.95


def fractions(path: Path) -> dict[str, float]:
    """Each recorded config's fraction of the landscape's optimum (Kernel Tuner's mean time, as the
    replay's objective), 0 where it failed.

    Raises:
        ValueError: naming ``path``, where it is not a readable recording."""
    try:
        entries = load_landscape(path).entries
    except (OSError, ValueError, KernelfarmError) as exc:
        raise ValueError(f"{path}: not a readable recording ({exc})") from exc
    times = {}
    for key, entry in entries.items():
        t = entry.mean_ms
        times[key] = t if t is not None and math.isfinite(t) and t > 0 else math.inf
    best = min(times.values())
    return {key: best / t if math.isfinite(t) else 0.0 for key, t in times.items()}


def target_ranks(target: dict[str, float], sources: dict[str, dict[str, float]]) -> dict[str, int]:
    """Per order (each source alone, and the sources' mean, geometric mean and minimum): 1 + how many
    of the target's configs it puts strictly ahead of its best-placed needle."""
    keys = list(target)
    by_source = np.array([[fracs.get(key, 0.0) for key in keys] for fracs in sources.values()])
    orders = {
        "mean": by_source.mean(axis=0),
        "geometric mean": np.log(np.maximum(by_source, 1e-3)).mean(axis=0),
        "minimum": by_source.min(axis=0),
    } | dict(zip(sources, by_source, strict=True))
    needle = np.array([target[key] >= NEEDLE for key in keys])
    return {name: 1 + int((score > score[needle].max()).sum()) for name, score in orders.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("landscapes", type=Path)
    parser.add_argument("--warm", type=Path, help="a warm_start_pairs.py report: its warm arm's medians")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    paths = {landscape_name(p): p for p in sorted(args.landscapes.glob("*.json*"))}
    families = {family: names for family, names in sorted(by_family(paths).items()) if len(names) >= 2}
    if not families:
        parser.error(f"no two recordings of one family (the same kernel on two GPUs) in {args.landscapes}")
    warm: dict[str, np.ndarray] = {}
    budget = 0
    if args.warm:
        try:
            warm_report = json.loads(args.warm.read_text())
            warm, budget = runs(warm_report, "warm"), int(warm_report["settings"]["budget"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            parser.error(f"{args.warm}: not a warm_start_pairs.py report ({exc})")
    print(f"rank of the first config within {NEEDLE} of the target's optimum when the target's space is")
    print("ordered by the other GPUs' whole recordings (1 = their first choice is a needle)\n")
    print("| target | needles / configs | mean | geometric mean | minimum | best single source | warm median |")
    print("|---|---|---|---|---|---|---|")
    report: dict[str, dict[str, object]] = {}
    for family, names in families.items():
        try:
            fracs = {name: fractions(paths[name]) for name in names}
        except ValueError as exc:
            parser.error(str(exc))
        for name in sorted(names):
            sources = {other.removeprefix(family + "_"): fracs[other] for other in names if other != name}
            ranks = target_ranks(fracs[name], sources)
            best = min(sources, key=lambda s: ranks[s])
            needles = sum(f >= NEEDLE for f in fracs[name].values())
            median = float(np.median(warm[name])) if name in warm else None
            # runs() counts a run that missed 0.95 within the budget as budget + 1
            shown = "" if median is None else f">{budget}" if median > budget else f"{median:g}"
            print(f"| {name} | {needles} / {len(fracs[name])} | {ranks['mean']} | {ranks['geometric mean']} "
                  f"| {ranks['minimum']} | {ranks[best]} ({best}) | {shown} |")  # fmt: skip
            report[name] = {"needles": needles, "configs": len(fracs[name]), "ranks": ranks, "warm_median": median}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
