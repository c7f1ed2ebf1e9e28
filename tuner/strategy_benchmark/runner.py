"""Run strategies over landscapes with repeats, in worker processes, and collect a report.

Each (landscape, strategy, repeat) is one task; repeat r uses seed ``seed + r`` so every strategy
sees the same seeds. Worker processes load each landscape once (``load_landscape`` is cached per
process) and pin BLAS to one thread: two processes on two cores beat one process with two
threads for the small matrices of an optimizer.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelfarm.core.landscape import Landscape, load_landscape
from kernelfarm.tuner.strategies.registry import get_strategy
from kernelfarm.tuner.strategy_benchmark.metrics import summarize
from kernelfarm.tuner.strategy_benchmark.replay import replay

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BenchmarkSettings:
    budget: int = 200
    repeats: int = 10
    keep_failures: bool = False
    seed: int = 0
    batch: int = 1
    jobs: int = 1
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # per strategy


def landscape_name(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".json"):
        name = name.removesuffix(suffix)
    return name


def prepared(path: Path, keep_failures: bool) -> Landscape:
    landscape = load_landscape(Path(path))
    return landscape if keep_failures else landscape.without_failures()


def _task(args: tuple[str, str, int, BenchmarkSettings]) -> tuple[list[float | None], list[float]]:
    path, strategy, seed, settings = args
    landscape = prepared(Path(path), settings.keep_failures)
    run = replay(
        landscape,
        get_strategy(strategy),
        settings.budget,
        seed,
        batch=settings.batch,
        options=settings.options.get(strategy),
    )
    return run.values, run.ask_seconds


def _init_worker() -> None:
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


def run_benchmark(
    paths: Sequence[Path],
    strategies: Sequence[str],
    settings: BenchmarkSettings,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Replay every strategy on every landscape; the JSON-ready report (see report.py)."""
    for name in strategies:
        get_strategy(name)  # fail before any work on an unknown name
    tasks = [
        (str(path), strategy, settings.seed + r, settings)
        for path in paths
        for strategy in strategies
        for r in range(settings.repeats)
    ]
    jobs = max(1, min(settings.jobs, os.cpu_count() or 1))
    if jobs == 1:
        _init_worker()
        results = [_task(t) for t in tasks]
    else:
        with ProcessPoolExecutor(jobs, initializer=_init_worker) as pool:
            results = list(pool.map(_task, tasks, chunksize=1))
    report: dict[str, Any] = {"settings": _settings_dict(settings), "landscapes": {}}
    it = iter(results)
    for path in paths:
        landscape = load_landscape(Path(path))
        entry: dict[str, Any] = {
            "kernel": landscape.kernel_name,
            "device": landscape.device_name,
            "configs": len(landscape.entries) if settings.keep_failures else len(landscape.valid_keys),
            "failed_configs": len(landscape.entries) - len(landscape.valid_keys),
            "optimum_ms": _optimum(landscape),
            "strategies": {},
        }
        for strategy in strategies:
            runs = [next(it) for _ in range(settings.repeats)]
            summary = summarize(
                [values for values, _ in runs],
                entry["optimum_ms"],
                settings.budget,
                [s for _, seconds in runs for s in seconds],
            )
            entry["strategies"][strategy] = summary.as_dict()
            if progress:
                progress(f"{landscape_name(Path(path))} {strategy}: done")
        report["landscapes"][landscape_name(Path(path))] = entry
    return report


def _optimum(landscape: Landscape) -> float:
    """The best recorded Kernel Tuner ``time`` (mean): what the replay's objective uses."""
    return min(r.mean_ms for r in landscape.entries.values() if r.mean_ms is not None)


def _settings_dict(settings: BenchmarkSettings) -> dict[str, Any]:
    return {
        "budget": settings.budget,
        "repeats": settings.repeats,
        "keep_failures": settings.keep_failures,
        "seed": settings.seed,
        "batch": settings.batch,
        "options": {k: dict(v) for k, v in settings.options.items()},
    }
