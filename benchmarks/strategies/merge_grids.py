"""Merge compare_all.py grid runs (same landscapes, budget, repeats and seeds) into one folder, so
lofo.py and make_tables.py see every variant at once: ``all_keep.json`` (strategies per
landscape) and ``all_traces.json.gz`` (traces per mode, landscape and strategy). A strategy in
several inputs is taken from the first; the inputs are named in ``settings.merged_from``.

A grid's labels name options against the defaults of the code that ran it: after a default
changes, ``GRID_FOLDER@key=value,...`` adds those options (the defaults of its time) to each of
its ``bayes`` labels that does not set them, so that every merged label means, to the current
code, what was run ("bayes" -> "bayes:alignment_select=false,...").

Usage:
    python benchmarks/strategies/merge_grids.py OUT_FOLDER GRID_FOLDER[@key=value,...] [...]
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any


def read_traces(folder: Path) -> dict[str, Any]:
    plain = folder / "all_traces.json"
    if plain.exists():
        return json.loads(plain.read_text())
    return json.loads(gzip.decompress((folder / "all_traces.json.gz").read_bytes()))


def explicit(label: str, defaults: str) -> str:
    """``label`` with the options of ``defaults`` ("key=value,...") it does not set itself."""
    name, _, options = label.partition(":")
    if name != "bayes" or not defaults:
        return label
    own = [o for o in options.split(",") if o]
    keys = {o.split("=", 1)[0] for o in own}
    added = [o for o in defaults.split(",") if o.split("=", 1)[0] not in keys]
    return f"{name}:{','.join(own + added)}"


def merge(out: Path, inputs: list[str]) -> None:
    report: dict[str, Any] = {}
    traces: dict[str, Any] = {"meta": {}, "traces": {}}
    for given in inputs:
        where, _, defaults = given.partition("@")
        folder = Path(where)
        part = json.loads((folder / "all_keep.json").read_text())
        if not report:
            report = {"settings": dict(part["settings"]), "landscapes": {}}
            report["settings"]["merged_from"] = []
        report["settings"]["merged_from"].append(given)
        for name, entry in part["landscapes"].items():
            mine = report["landscapes"].setdefault(name, {**entry, "strategies": {}})
            for strategy, summary in entry["strategies"].items():
                mine["strategies"].setdefault(explicit(strategy, defaults), summary)
        data = read_traces(folder)
        traces["meta"].update(data["meta"])
        for mode, per_landscape in data["traces"].items():
            for name, per_strategy in per_landscape.items():
                mine = traces["traces"].setdefault(mode, {}).setdefault(name, {})
                for strategy, runs in per_strategy.items():
                    mine.setdefault(explicit(strategy, defaults), runs)
    out.mkdir(parents=True, exist_ok=True)
    (out / "all_keep.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "all_traces.json.gz").write_bytes(gzip.compress(json.dumps(traces).encode(), mtime=0))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    merge(Path(sys.argv[1]), sys.argv[2:])
