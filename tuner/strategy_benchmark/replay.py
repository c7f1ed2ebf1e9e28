"""Replay a recorded landscape through a strategy, as the coordinator would drive it.

The coordinator rebuilds the optimizer from history on every step, so the replay does too: each
step calls ``from_history(space, {}, history, seed)`` and asks for ``batch`` configs (k free
workers), looks their times up in the landscape, and appends them to the history. A failed
config is an evaluation like any other (it costs GPU time on real hardware); the caller removes
failed configs from the landscape beforehand for the "failures removed" mode.

The objective is Kernel Tuner's ``time`` (the mean of the repetitions): the file's own number,
so Kernel Tuner's strategies and ours are scored on exactly the same values.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelfarm.core.landscape import Landscape
from kernelfarm.tuner.strategies.base import Observation, Optimizer


@dataclass
class Run:
    """One replayed tuning run: objective per evaluation (None = failed) and ask wall times."""

    values: list[float | None] = field(default_factory=list)
    ask_seconds: list[float] = field(default_factory=list)
    ask_sizes: list[int] = field(default_factory=list)
    history: list[Observation] = field(default_factory=list)


def replay(
    landscape: Landscape,
    strategy: type[Optimizer],
    budget: int,
    seed: int,
    batch: int = 1,
    options: Mapping[str, Any] | None = None,
    prior: Sequence[Observation] = (),
) -> Run:
    """Run ``strategy`` on ``landscape`` for ``budget`` evaluations in batches of ``batch``."""
    space = landscape.space
    run = Run()
    history = run.history
    while len(history) < budget:
        k = min(batch, budget - len(history))
        start = time.perf_counter()
        optimizer = strategy.from_history(space, {}, history, seed, options, prior=prior)
        configs = optimizer.ask(k)
        run.ask_seconds.append(time.perf_counter() - start)
        run.ask_sizes.append(len(configs))
        if not configs:
            break  # the space is exhausted
        # what the coordinator keeps in trial provenance (an LLM arm's proposals), kept here too
        proposed_by: dict[str, str] = getattr(optimizer, "proposed_by", {})
        for config in configs:
            key = space.key(config)
            recording = landscape.entries[key]
            origin = proposed_by[key].split(":", 1)[0] if key in proposed_by else None
            if recording.failure is None and recording.mean_ms is not None:
                history.append(Observation(config, recording.mean_ms, origin=origin))
                run.values.append(recording.mean_ms)
            else:
                history.append(Observation(config, None, recording.failure, origin=origin))
                run.values.append(None)
    return run
