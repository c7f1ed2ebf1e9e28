"""Ask latency for a batch of k at 50/200/500/1000 observations, on ONE core.

Pins the process to one CPU and BLAS to one thread (set before numpy loads), then times
``from_history(...).ask(k)`` on random histories of each landscape (see tuner/strategy_benchmark/latency.py).

Usage:
    python benchmarks/strategies/ask_latency.py LANDSCAPE... [--strategy bayes] [--batch 8] [--json out.json]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
from dataclasses import asdict  # noqa: E402
from pathlib import Path  # noqa: E402

from compare_all import farm_options  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from kernelfarm.core.landscape import load_landscape  # noqa: E402
from kernelfarm.tuner.strategy_benchmark.latency import measure  # noqa: E402
from kernelfarm.tuner.strategy_benchmark.runner import landscape_name  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("landscapes", nargs="+", type=Path)
    parser.add_argument("--strategy", default="bayes")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--sizes", default="50,200,500,1000")
    parser.add_argument("--samples", type=int, default=9)
    parser.add_argument("--cpu", type=int, default=0, help="the one CPU to run on")
    parser.add_argument("--prior", type=int, default=0, help="warm start: prior trials (from 3 sources) per ask")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.cpu})
    sizes = [int(s) for s in args.sizes.split(",")]
    table = Table(title=f"{args.strategy}: ask({args.batch}) latency on one core (ms)", title_justify="left")
    for column in ("landscape", "observations", "median", "p90", "min"):
        table.add_column(column, justify="right")
    report: dict[str, list[dict[str, float]]] = {}
    for path in args.landscapes:
        landscape = load_landscape(path)
        name, options = farm_options(args.strategy)  # "bayes" or "bayes:key=value,..." as compare_all.py --farm
        rows = measure(
            landscape, name, sizes, batch=args.batch, samples=args.samples, prior_size=args.prior, options=options
        )
        report[landscape_name(path)] = [asdict(r) for r in rows]
        for r in rows:
            table.add_row(
                landscape_name(path), str(r.observations), f"{r.median_ms:.1f}", f"{r.p90_ms:.1f}", f"{r.min_ms:.1f}"
            )
    Console().print(table)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {"strategy": args.strategy, "batch": args.batch, "prior": args.prior, "landscapes": report}, indent=2
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
