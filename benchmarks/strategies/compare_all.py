"""The farm's strategies and every Kernel Tuner 1.5.0 strategy on every landscape, both modes, in
one run of many processes.

``kernelfarm bench-strategies`` and kernel_tuner_replay.py run one tool at a time; this driver
flattens (mode, landscape, strategy, repeat) of both into one task list for a pool of ``--jobs``
processes (the device machine's 16 CPU cores), stops taking new tasks at ``--deadline`` seconds,
and writes one report per mode in the layout of ``bench-strategies --json`` (``all_keep.json``,
``all_drop.json``; Kernel Tuner's strategies named ``kt:NAME``) plus every raw trace
(``all_traces.json``: the standardized score in make_tables.py ``score`` needs them).
Farm strategies run through tuner/strategy_benchmark/replay.py exactly as ``bench-strategies``
runs them (batch 1); Kernel Tuner's through kernel_tuner_replay.run_once.

Strategies: every name in Kernel Tuner's ``strategy_map`` except ``brute_force`` (it evaluates
the whole space: not a search) and ``pyatf_strategies`` when the optional ``pyatf`` package is
missing, and ``skopt`` (SKIPPED says why). Tasks are ordered so that a deadline cuts the slow
strategies' last repeats, never a whole strategy: repeat r of every (mode, landscape, strategy)
runs before repeat r + 1. The report's ``repeats`` says how many repeats each cell got.

A farm strategy may carry options, ``--farm 'bayes:n_init=5,xi=0.1'`` (the label in the reports is
the whole text): the leave-one-family-out grid (lofo.py) is such a run with ``--no-kernel-tuner``.

Usage (``--landscapes`` is a folder of Kernel Tuner cache files):
    python benchmarks/strategies/compare_all.py --landscapes LANDSCAPES --budget 200 --repeats 10 \
        --farm bayes --farm genetic --farm random --jobs 16 --deadline 300 --out OUT
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

from kernel_tuner_replay import failed, plain_cache, run_once

from kernelfarm.core.landscape import read_json_tolerant
from kernelfarm.tuner.strategy_benchmark.metrics import summarize
from kernelfarm.tuner.strategy_benchmark.runner import landscape_name

SKIPPED = {
    "brute_force": "evaluates the whole space (not a search)",
    "skopt": "raises on failed configs (NaN probabilities) and took > 290 s for one 200-evaluation run on gemm",
}


def strategies() -> tuple[list[str], dict[str, str]]:
    from kernel_tuner.interface import strategy_map

    skipped = dict(SKIPPED)
    try:
        import pyatf  # noqa: F401
    except ImportError:
        skipped["pyatf_strategies"] = "needs the optional pyatf package (not a dependency of kernel_tuner 1.5.0)"
    return [s for s in strategy_map if s not in skipped], skipped


def farm_options(label: str) -> tuple[str, dict[str, Any]]:
    """``NAME`` or ``NAME:key=value,...`` -> (registry name, options); values parsed as JSON
    where they can be (numbers, true/false), else kept as text."""
    name, _, rest = label.partition(":")
    options: dict[str, Any] = {}
    for item in filter(None, rest.split(",")):
        key, _, text = item.partition("=")
        try:
            options[key] = json.loads(text)
        except json.JSONDecodeError:
            options[key] = text
    return name, options


def _farm_run(path: str, mode: str, strategy: str, budget: int, seed: int) -> tuple[list[float | None], float]:
    """One replay of a farm strategy (a label, see ``farm_options``): (trace, median ask seconds)."""
    from threadpoolctl import threadpool_limits

    from kernelfarm.tuner.strategies.registry import get_strategy
    from kernelfarm.tuner.strategy_benchmark.replay import replay
    from kernelfarm.tuner.strategy_benchmark.runner import prepared

    with threadpool_limits(1):
        name, options = farm_options(strategy)
        run = replay(prepared(Path(path), mode == "keep"), get_strategy(name), budget, seed, options=options)
    return run.values, statistics.median(run.ask_seconds)


Outcome = tuple[str, str, str, int, list[float | None] | None, float, str]


def _task(args: tuple[str, str, str, str, int, int]) -> Outcome:
    """(mode, landscape, label, seed, trace, seconds per evaluation or per ask, error)."""
    mode, name, source, strategy, budget, seed = args
    start = time.perf_counter()
    try:
        if strategy.startswith("kt:"):
            trace, wall = run_once((source, strategy[3:], budget, seed))
            return mode, name, strategy, seed, trace, wall / max(len(trace), 1), ""
        trace, ask = _farm_run(source, mode, strategy, budget, seed)
        return mode, name, strategy, seed, trace, ask, ""
    except Exception:  # a strategy that breaks on a landscape is reported, not fatal to the run
        return mode, name, strategy, seed, None, time.perf_counter() - start, traceback.format_exc(limit=3)[-600:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--landscapes", type=Path, required=True)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--deadline", type=float, default=1e9, help="seconds after which no task starts")
    parser.add_argument("--modes", default="keep,drop")
    parser.add_argument("--strategy", action="append", help="Kernel Tuner strategies; default: all of them")
    parser.add_argument("--farm", action="append", default=[], help="farm strategies (registry names)")
    parser.add_argument(
        "--grace", type=float, default=120, help="seconds after the deadline before running tasks are abandoned"
    )
    parser.add_argument("--no-kernel-tuner", action="store_true", help="only the --farm strategies")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    began = time.monotonic()
    names, skipped = ([], {}) if args.no_kernel_tuner else strategies()
    names = args.farm + [f"kt:{s}" for s in (args.strategy or names)] if not args.no_kernel_tuner else list(args.farm)
    paths = sorted(args.landscapes.glob("*.json*"))
    meta: dict[str, dict[str, Any]] = {}
    tmp = Path(tempfile.mkdtemp())
    caches: dict[tuple[str, str], str] = {}
    sources: dict[str, str] = {}
    for path in paths:
        data = read_json_tolerant(path)
        times = [v["time"] for v in data["cache"].values() if not failed(v)]
        meta[landscape_name(path)] = {
            "kernel": data.get("kernel_name"),
            "device": data.get("device_name"),
            "all": len(data["cache"]),
            "ok": len(times),
            "optimum_ms": float(min(times)),
        }
        for mode in args.modes.split(","):
            caches[(mode, landscape_name(path))] = str(plain_cache(path, mode == "keep", tmp))
            sources[landscape_name(path)] = str(path)
    tasks = [
        (mode, name, cache if strategy.startswith("kt:") else sources[name], strategy, args.budget, args.seed + r)
        for r in range(args.repeats)
        for (mode, name), cache in caches.items()
        for strategy in names
    ]
    traces: dict[str, Any] = {}
    errors: list[str] = []
    pool = ProcessPoolExecutor(args.jobs)
    queue = iter(tasks)
    running: set[Future[Any]] = set()

    def fill() -> None:
        while len(running) < 2 * args.jobs and time.monotonic() - began < args.deadline:
            task = next(queue, None)
            if task is None:
                return
            running.add(pool.submit(_task, task))

    fill()
    while running:
        done, _ = wait(running, timeout=5, return_when=FIRST_COMPLETED)
        for future in done:
            running.discard(future)
            mode, name, strategy, seed, trace, wall, error = future.result()
            if error:
                errors.append(f"{mode} {name} {strategy} seed {seed}: {error}")
                continue
            cell = traces.setdefault(mode, {}).setdefault(name, {}).setdefault(strategy, [])
            cell.append({"seed": seed, "trace": trace, "seconds": wall})
        fill()
        if time.monotonic() - began > args.deadline + args.grace:  # a hung task: give up on what still runs
            errors.append(f"{len(running)} tasks still running at the deadline were abandoned")
            break
    pool.shutdown(wait=False, cancel_futures=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "all_traces.json").write_text(json.dumps({"meta": meta, "traces": traces}) + "\n")
    for mode, per_landscape in traces.items():
        report: dict[str, Any] = {
            "settings": {
                "budget": args.budget, "repeats": args.repeats, "keep_failures": mode == "keep", "seed": args.seed,
                "batch": 1, "kernel_tuner": "1.5.0, simulation mode", "kernel_tuner_skipped": skipped, "errors": errors,
                "wall_s": round(time.monotonic() - began, 1), "jobs": args.jobs,
            },
            "landscapes": {},
        }  # fmt: skip
        for name in meta:
            m = meta[name]
            entry: dict[str, Any] = {
                "kernel": m["kernel"], "device": m["device"], "configs": m["all"] if mode == "keep" else m["ok"],
                "failed_configs": m["all"] - m["ok"], "optimum_ms": m["optimum_ms"], "strategies": {},
            }  # fmt: skip
            for strategy in names:
                runs = sorted(per_landscape.get(name, {}).get(strategy, []), key=lambda r: r["seed"])
                if not runs:
                    continue
                # ms per ask: the farm's median ask; Kernel Tuner's wall time per evaluation
                seconds = [r["seconds"] for r in runs]
                summary = summarize([r["trace"] for r in runs], m["optimum_ms"], args.budget, seconds)
                entry["strategies"][strategy] = summary.as_dict()
            report["landscapes"][name] = entry
        (args.out / f"all_{mode}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"{sum(len(c) for m in traces.values() for per in m.values() for c in per.values())} runs, "
          f"{len(errors)} errors, {time.monotonic() - began:.0f} s")  # fmt: skip
    for line in errors[:20]:
        print(line)


if __name__ == "__main__":
    main()
