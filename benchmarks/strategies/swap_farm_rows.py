"""Put a newer run of the farm's strategies into an earlier compare_all.py comparison, on the
comparison's own seeds, so the tables compare the current code with Kernel Tuner's strategies
without re-running those (replay is deterministic: the same recordings and seeds give Kernel
Tuner's strategies the same traces).

For each mode and landscape, the newer runs are kept only for the seeds every strategy of the
earlier comparison has (its deadline may have cut a last repeat), and every summary is
recomputed from the traces. An earlier strategy with a newer strategy's name is kept, renamed
``NAME (before)``.

Usage:
    python benchmarks/strategies/swap_farm_rows.py EARLIER NEWER OUT
(EARLIER, NEWER: folders with all_keep.json / all_drop.json and all_traces.json[.gz]; OUT gets the same.)
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

from merge_grids import read_traces

from kernelfarm.tuner.strategy_benchmark.metrics import summarize


def swap(earlier: Path, newer: Path, out: Path) -> None:
    old, new = read_traces(earlier), read_traces(newer)
    merged: dict[str, Any] = {"meta": old["meta"], "traces": {}}
    out.mkdir(parents=True, exist_ok=True)
    for mode, per_landscape in old["traces"].items():
        report = json.loads((earlier / f"all_{mode}.json").read_text())
        report["settings"]["farm_rows_from"] = str(newer)
        for name, per_strategy in per_landscape.items():
            seeds = set.intersection(*({r["seed"] for r in runs} for runs in per_strategy.values()))
            fresh = new["traces"].get(mode, {}).get(name, {})
            cell = {(f"{s} (before)" if s in fresh else s): runs for s, runs in per_strategy.items()}
            cell.update({s: sorted((r for r in runs if r["seed"] in seeds), key=lambda r: r["seed"])
                         for s, runs in fresh.items()})  # fmt: skip
            merged["traces"].setdefault(mode, {})[name] = cell
            entry = report["landscapes"][name]
            budget, optimum = report["settings"]["budget"], entry["optimum_ms"]
            entry["strategies"] = {
                s: summarize([r["trace"] for r in runs], optimum, budget, [r["seconds"] for r in runs]).as_dict()
                for s, runs in cell.items()
                if runs
            }
        (out / f"all_{mode}.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "all_traces.json.gz").write_bytes(gzip.compress(json.dumps(merged).encode(), mtime=0))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    swap(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
