"""Ask latency of two option sets of bayes on the same histories, interleaved in one process
(old, new, new, old per history), pinned to one core: on a shared machine the load moves both
alike, so their difference is the code's, where separate runs of ask_latency.py differ by tens of
milliseconds from one round to the next.

Usage:
    python benchmarks/strategies/ask_latency_paired.py LANDSCAPES NAME... [--old 'key=value,...']
        [--new 'key=value,...'] [--observations 500] [--batch 8] [--samples 15] [--cpu 1] [--json OUT]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from compare_all import farm_options  # noqa: E402

from kernelfarm.core.landscape import load_landscape  # noqa: E402
from kernelfarm.tuner.strategies.bayes import BayesianOptimizer  # noqa: E402
from kernelfarm.tuner.strategy_benchmark.latency import random_history  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("landscapes", type=Path)
    parser.add_argument("names", nargs="+")
    parser.add_argument("--old", default="alignment_select=false,alignment_length=0.0,local_after=0")
    parser.add_argument("--new", default="")
    parser.add_argument("--observations", type=int, default=500)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--cpu", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.cpu})
    options = {"old": farm_options("bayes:" + args.old)[1], "new": farm_options("bayes:" + args.new)[1]}
    report: dict[str, object] = {"settings": {k: str(v) for k, v in vars(args).items() if k != "landscapes"}}
    for name in args.names:
        landscape = load_landscape(next(args.landscapes.glob(f"{name}.json*")))
        BayesianOptimizer.from_history(landscape.space, {}, [], 0).ask(1)  # the candidate table, once
        times: dict[str, list[float]] = {"old": [], "new": []}
        for seed in range(args.samples):
            history = random_history(landscape, args.observations, seed)
            for code in ("old", "new", "new", "old"):
                start = time.perf_counter()
                BayesianOptimizer.from_history(landscape.space, {}, history, seed, options[code]).ask(args.batch)
                times[code].append(1000 * (time.perf_counter() - start))
        row = {k: {"median_ms": statistics.median(v), "min_ms": min(v)} for k, v in times.items()}
        report[name] = row
        print(name, {k: (round(v["median_ms"], 1), round(v["min_ms"], 1)) for k, v in row.items()}, flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
