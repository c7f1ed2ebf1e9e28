"""Scores of replayed runs: fraction of the optimum over evaluations, evaluations to a target.

``fraction`` after b evaluations is t_opt / t_best(b) (1.0 = the landscape's optimum found, 0.0
= nothing successful yet); a run that ended early (space exhausted) keeps its final value.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

CHECKPOINTS = (25, 50, 100, 200)
TARGETS = (0.90, 0.95)


def fraction_curve(values: Sequence[float | None], optimum: float, budget: int) -> list[float]:
    """fraction of optimum after 1..budget evaluations."""
    curve: list[float] = []
    best = math.inf
    for value in values[:budget]:
        if value is not None:
            best = min(best, value)
        curve.append(optimum / best if best < math.inf else 0.0)
    last = curve[-1] if curve else 0.0
    curve.extend([last] * (budget - len(curve)))
    return curve


def evaluations_to(curve: Sequence[float], target: float) -> int | None:
    """1-based number of evaluations after which the fraction first reaches ``target``."""
    for i, value in enumerate(curve):
        if value >= target - 1e-12:
            return i + 1
    return None


@dataclass(frozen=True)
class Summary:
    """Aggregate over repeats of one (landscape, strategy) pair; the JSON report's fields."""

    frac_at: dict[str, float | None]
    n90_median: float | None
    n95_median: float | None
    n90_success: float
    n95_success: float
    failed_fraction: float
    ask_ms_median: float | None
    repeats: int
    budget: int

    def as_dict(self) -> dict[str, object]:
        return {
            "frac_at": self.frac_at,
            "n90_median": self.n90_median,
            "n95_median": self.n95_median,
            "n90_success": self.n90_success,
            "n95_success": self.n95_success,
            "failed_fraction": self.failed_fraction,
            "ask_ms_median": self.ask_ms_median,
            "repeats": self.repeats,
            "budget": self.budget,
        }


def summarize(
    traces: Sequence[Sequence[float | None]],
    optimum: float,
    budget: int,
    ask_seconds: Sequence[float] = (),
) -> Summary:
    """Summary of runs given as objective traces (None = failed evaluation).

    ``frac_at`` holds the mean fraction at each checkpoint within the budget (None beyond it);
    ``n*_median`` is the median number of evaluations to the target, counting runs that missed it
    as infinite (so None when at least half missed); ``n*_success`` is the share that reached it.
    """
    curves = [fraction_curve(t, optimum, budget) for t in traces]
    frac_at: dict[str, float | None] = {}
    for b in CHECKPOINTS:
        frac_at[str(b)] = statistics.fmean(c[b - 1] for c in curves) if b <= budget and curves else None
    hits = {t: [evaluations_to(c, t) for c in curves] for t in TARGETS}
    evaluated = sum(len(t[:budget]) for t in traces)
    failed = sum(1 for t in traces for v in t[:budget] if v is None)
    return Summary(
        frac_at=frac_at,
        n90_median=_median_with_misses(hits[0.90]),
        n95_median=_median_with_misses(hits[0.95]),
        n90_success=_share(hits[0.90]),
        n95_success=_share(hits[0.95]),
        failed_fraction=failed / evaluated if evaluated else 0.0,
        ask_ms_median=1000 * statistics.median(ask_seconds) if ask_seconds else None,
        repeats=len(traces),
        budget=budget,
    )


def _median_with_misses(hits: Sequence[int | None]) -> float | None:
    if not hits:
        return None
    value = statistics.median([h if h is not None else math.inf for h in hits])
    return None if math.isinf(value) else float(value)


def _share(hits: Sequence[int | None]) -> float:
    return sum(h is not None for h in hits) / len(hits) if hits else 0.0
