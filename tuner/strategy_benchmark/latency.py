"""Ask latency of a strategy at a given history length: what one coordinator step costs.

Histories are random samples of a landscape's recorded configs (failed ones included, so the
feasibility model is part of the cost), and the optimizer is rebuilt from history for every ask,
exactly as the stateless coordinator does. Callers pin the process to one core and BLAS to one
thread (benchmarks/strategies/ask_latency.py), which is the coordinator's production setting.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kernelfarm.core.landscape import Landscape
from kernelfarm.tuner.strategies.base import Observation
from kernelfarm.tuner.strategies.registry import get_strategy


@dataclass(frozen=True)
class Latency:
    observations: int
    batch: int
    median_ms: float
    p90_ms: float
    min_ms: float
    samples: int


def random_history(landscape: Landscape, n: int, seed: int) -> list[Observation]:
    keys = sorted(landscape.entries)
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(keys), size=min(n, len(keys)), replace=False)
    history = []
    for i in chosen.tolist():
        recording = landscape.entries[keys[i]]
        config = landscape.space.config_from_key(keys[i])
        if recording.failure is None:
            history.append(Observation(config, recording.mean_ms))
        else:
            history.append(Observation(config, None, recording.failure))
    return history


def measure(
    landscape: Landscape,
    strategy: str,
    sizes: Sequence[int],
    batch: int = 8,
    samples: int = 9,
    prior_size: int = 0,
    options: Mapping[str, Any] | None = None,
) -> list[Latency]:
    """``prior_size`` > 0: each ask also gets a warm-start prior of that many random trials of the
    landscape from three "other GPUs" (the landscape's own times: the cost does not depend on
    them). The prior is the same for every ask, as within one job: the first ask fits the prior's
    model, later ones reuse it (transfer.py), so the median is a job's steady state."""
    cls = get_strategy(strategy)
    cls.from_history(landscape.space, {}, [], 0, options).ask(1)  # build the candidate table once (cached per space)
    out = []
    for n in sizes:
        times = []
        for seed in range(samples):
            history = random_history(landscape, n, seed)
            prior = [
                replace(o, source=f"gpu{g}")
                for g in range(3 if prior_size else 0)
                for o in random_history(landscape, prior_size // 3, 1000 * (g + 1))
            ]
            start = time.perf_counter()
            cls.from_history(landscape.space, {}, history, seed, options, prior=prior).ask(batch)
            times.append(1000 * (time.perf_counter() - start))
        times.sort()
        out.append(
            Latency(n, batch, statistics.median(times), times[int(0.9 * (len(times) - 1))], times[0], len(times))
        )
    return out
