"""The one timing function of the farm: CUDA events around every repetition.

Shared by every GPU backend: a backend hands it a launch (see :mod:`.loader`), never its own loop.

Rules: warm up by time; flush L2 between repetitions (outside the
events) so a kernel whose data would stay cached is not timed on a hot cache; record every
repetition; stop when the median is known to ``target_rel_error`` (its standard error, estimated
from the spread) after at least ``min_reps`` and at most ``max_time_s`` / ``max_reps``.

Repetitions are enqueued in batches and the host waits once per batch, so the GPU is never idle
waiting for the host between repetitions, and the flush before each repetition keeps the launch
queue ahead of the GPU (the start event never fires before the kernel was submitted).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelfarm.core.measurement import TimingStats


@dataclass(frozen=True)
class TimingPolicy:
    """How long and how often :func:`time_kernel` times a kernel (warm-up, stopping rule, caps)."""

    warmup_s: float = 0.02
    min_reps: int = 10
    max_reps: int = 500
    max_time_s: float = 1.5
    target_rel_error: float = 0.005  # standard error of the median / median
    batch: int = 10
    flush_l2: bool = True


def median_rel_error(times: list[float]) -> float:
    """Standard error of the median relative to it (normal approximation: 1.2533 sigma/sqrt(n))."""
    if len(times) < 3:
        return math.inf
    median = statistics.median(times)
    if median <= 0:
        return math.inf
    return 1.2533 * statistics.stdev(times) / math.sqrt(len(times)) / median


class L2Flusher:
    """Overwrites a buffer twice the size of L2 so the next kernel starts with a cold cache."""

    def __init__(self, l2_bytes: int) -> None:
        import cupy as cp

        self._buffer = cp.empty(max(2 * l2_bytes, 1 << 20), dtype=cp.uint8)

    def __call__(self) -> None:
        self._buffer.fill(0)  # a memset kernel on the current stream


def time_kernel(
    launch: Callable[[], Any],
    policy: TimingPolicy = TimingPolicy(),
    flush: Callable[[], Any] | None = None,
) -> TimingStats:
    """Time ``launch`` (which enqueues the work on the current stream) with CUDA events.

    Args:
        launch: enqueues one repetition; must not synchronize.
        policy: warm-up, stopping rule and caps.
        flush: called before each repetition, outside the timed region (an L2 flush, or a
            rotation to the next input set).

    Returns:
        TimingStats with every repetition in milliseconds.
    """
    import cupy as cp

    stream = cp.cuda.get_current_stream()
    flush = flush if policy.flush_l2 else None
    # Warm-up by time: module load, clocks ramping, caches of the driver.
    start = time.perf_counter()
    warm = 0
    while warm < 2 or time.perf_counter() - start < policy.warmup_s:
        if flush:
            flush()
        launch()
        warm += 1
        if warm % 8 == 0:
            stream.synchronize()
    stream.synchronize()

    times: list[float] = []
    events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(policy.batch)]
    start = time.perf_counter()
    while len(times) < policy.max_reps:
        count = min(policy.batch, policy.max_reps - len(times))
        for begin, end in events[:count]:
            if flush:
                flush()
            begin.record(stream)
            launch()
            end.record(stream)
        events[count - 1][1].synchronize()
        times.extend(cp.cuda.get_elapsed_time(b, e) for b, e in events[:count])
        if len(times) >= policy.min_reps and median_rel_error(times) <= policy.target_rel_error:
            break
        if time.perf_counter() - start > policy.max_time_s and len(times) >= policy.min_reps:
            break
    return TimingStats.from_times(times)
