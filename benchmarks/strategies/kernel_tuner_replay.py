"""Kernel Tuner 1.5.0's strategies replayed on the same landscapes, scored like ours.

Kernel Tuner is a benchmark-only dependency (``pip install -e '.[bench]'``); runtime code never
imports it. Each run calls ``kernel_tuner.tune_kernel`` in simulation mode on a plain-JSON copy
of the landscape, with the restriction "the config is in the file" (what ``tune_cache`` does,
except that with ``--keep-failures`` failed configs stay in the space: Kernel Tuner serves them
from the cache as errors and counts each as an evaluation, as on hardware). Repeat r seeds
Python's and numpy's global generators with seed + r (Kernel Tuner draws from both).

The trace is the results list in evaluation order with repeats removed (Kernel Tuner's budget
counts unique configs); the objective is the file's ``time``, as in our replay. ``ask_ms_median``
is Kernel Tuner's wall time per evaluation over the whole run (it has no separate ask).

Usage:
    python benchmarks/strategies/kernel_tuner_replay.py LANDSCAPE... --strategy genetic_algorithm \
        --strategy bayes_opt:method=ei --budget 200 --repeats 10 [--keep-failures] --json out.json
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import random
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from kernelfarm.core.landscape import read_json_tolerant
from kernelfarm.tuner.strategy_benchmark.metrics import summarize
from kernelfarm.tuner.strategy_benchmark.runner import landscape_name

log = logging.getLogger("kernel_tuner_replay")
FAILURE_STRINGS = {"CompilationFailedConfig", "RuntimeFailedConfig", "InvalidConfig", "ErrorConfig"}


def failed(entry: dict[str, Any]) -> bool:
    return "__error__" in entry or isinstance(entry.get("time"), str) or not isinstance(entry.get("time"), int | float)


def plain_cache(path: Path, keep_failures: bool, directory: Path) -> Path:
    """A plain-JSON copy of the landscape (Kernel Tuner reads neither .gz nor unterminated files)."""
    data = read_json_tolerant(path)
    if not keep_failures:
        data["cache"] = {k: v for k, v in data["cache"].items() if not failed(v)}
    out = directory / f"{landscape_name(path)}.{'keep' if keep_failures else 'drop'}.json"
    out.write_text(json.dumps(data))
    return out


def parse_strategy(text: str) -> tuple[str, dict[str, Any]]:
    """``name`` or ``name:key=value,key=value`` (values as JSON when they parse)."""
    name, _, rest = text.partition(":")
    options: dict[str, Any] = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return name, options


@functools.lru_cache(maxsize=4)
def _recorded(cache_path: str) -> tuple[dict[str, Any], frozenset[tuple[Any, ...]]]:
    """The cache file and its configs, read once per process (parsing is most of a cheap run)."""
    data = json.loads(Path(cache_path).read_text())
    keys = data["tune_params_keys"]
    return data, frozenset(tuple(entry[k] for k in keys) for entry in data["cache"].values())


def _memoize_kernel_tuner_cache() -> None:
    """Kernel Tuner re-reads the whole cache file on every tune_kernel call; in simulation mode it
    only copies entries out of it (runners/simulation.py), so each run gets a shallow copy of one
    parsed file instead. Traces are the same with and without this (checked when it was added)."""
    import kernel_tuner.util as util

    if getattr(util.read_cache, "memoized", False):
        return
    original = util.read_cache
    parsed = functools.lru_cache(maxsize=4)(lambda path, open_cache: original(path, open_cache=open_cache))

    def read_cache(cachefile: str, open_cache: bool = True) -> dict[str, Any]:
        data = parsed(cachefile, open_cache)
        return {**data, "cache": dict(data["cache"])}

    read_cache.memoized = True  # type: ignore[attr-defined]
    util.read_cache = read_cache


def run_once(args: tuple[str, str, int, int]) -> tuple[list[float | None], float]:
    """One Kernel Tuner run: (objective per unique evaluation, wall seconds)."""
    cache_path, strategy, budget, seed = args
    from constraint import FunctionConstraint
    from kernel_tuner import tune_kernel

    _memoize_kernel_tuner_cache()
    data, recorded = _recorded(cache_path)
    keys = data["tune_params_keys"]

    def in_file(*values: Any) -> bool:
        return values in recorded

    name, options = parse_strategy(strategy)
    size = data["problem_size"]
    problem = tuple(size) if isinstance(size, list) else (size,)
    random.seed(seed)
    np.random.seed(seed)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, _ = tune_kernel(
            data["kernel_name"], "", problem, [], data["tune_params"],
            restrictions=[FunctionConstraint(in_file)], cache=cache_path, simulation_mode=True,
            strategy=name, strategy_options={"max_fevals": budget, **options}, quiet=True, verbose=False,
        )  # fmt: skip
    wall = time.perf_counter() - start
    seen: set[str] = set()
    trace: list[float | None] = []
    for result in results:
        key = ",".join(str(result[k]) for k in keys)
        if key in seen:
            continue
        seen.add(key)
        value = result.get("time")
        ok = "__error__" not in result and isinstance(value, int | float) and not isinstance(value, bool)
        trace.append(float(value) if ok else None)
    return trace[:budget], wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("landscapes", nargs="+", type=Path)
    parser.add_argument("--strategy", action="append", required=True, help="name[:key=value,...]")
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--keep-failures", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    report: dict[str, Any] = {
        "settings": {
            "budget": args.budget, "repeats": args.repeats, "keep_failures": args.keep_failures,
            "seed": args.seed, "batch": 1, "tool": "kernel_tuner 1.5.0 simulation mode",
        },
        "landscapes": {},
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, ProcessPoolExecutor(args.jobs) as pool:
        for path in args.landscapes:
            data = read_json_tolerant(path)
            times = [v["time"] for v in data["cache"].values() if not failed(v)]
            optimum = float(min(times))
            cache_path = plain_cache(path, args.keep_failures, Path(tmp))
            entry: dict[str, Any] = {
                "kernel": data.get("kernel_name"), "device": data.get("device_name"),
                "configs": len(data["cache"]) if args.keep_failures else len(times),
                "failed_configs": len(data["cache"]) - len(times), "optimum_ms": optimum, "strategies": {},
            }  # fmt: skip
            for strategy in args.strategy:
                tasks = [(str(cache_path), strategy, args.budget, args.seed + r) for r in range(args.repeats)]
                runs = list(pool.map(run_once, tasks))
                per_eval = [wall / max(len(trace), 1) for trace, wall in runs]
                summary = summarize([trace for trace, _ in runs], optimum, args.budget, per_eval)
                entry["strategies"][f"kt:{strategy}"] = summary.as_dict()
                log.info("%s kt:%s %s", landscape_name(path), strategy, json.dumps(summary.as_dict()["frac_at"]))
            report["landscapes"][landscape_name(path)] = entry
    from rich.console import Console

    from kernelfarm.tuner.strategy_benchmark.report import tables

    for table in tables(report):
        Console().print(table)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
