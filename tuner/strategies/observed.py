"""History (and warm-start prior) mapped onto candidate-table rows, split by outcome."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kernelfarm.core.space import SearchSpace
from kernelfarm.tuner.strategies.base import Observation
from kernelfarm.tuner.strategies.candidates import CandidateTable


@dataclass(frozen=True)
class Observed:
    """Rows of the candidate table by outcome; ``log_time`` aligns with ``success_rows``.

    A config observed twice (a retried trial) counts once per outcome: its best time, and as a
    failure only if it never succeeded. Configs outside the table (no longer valid, or values not
    in the space) are ignored except that they can never be proposed anyway.
    """

    success_rows: np.ndarray
    log_time: np.ndarray
    failed_rows: np.ndarray
    pending_rows: np.ndarray

    @property
    def seen_rows(self) -> np.ndarray:
        return np.concatenate([self.success_rows, self.failed_rows, self.pending_rows])

    @property
    def n_done(self) -> int:
        return len(self.success_rows) + len(self.failed_rows)


def observe(table: CandidateTable, space: SearchSpace, history: Sequence[Observation]) -> Observed:
    return observe_rows(history, table_rows(table, space, history))


def table_rows(table: CandidateTable, space: SearchSpace, history: Sequence[Observation]) -> np.ndarray:
    """Table row of each observation's config (-1: not a valid member); the costly part of observe."""
    return table.rows_of([o.config for o in history], space.names) if history else np.zeros(0, np.int64)


def observe_rows(history: Sequence[Observation], rows: np.ndarray) -> Observed:
    """``observe`` with the rows already looked up (``table_rows``)."""
    best: dict[int, float] = {}
    failed: set[int] = set()
    pending: set[int] = set()
    for obs, row in zip(history, rows.tolist(), strict=True):
        if row < 0:
            continue
        if obs.pending:
            pending.add(row)
        elif obs.value is not None and obs.failure is None and obs.value > 0 and math.isfinite(obs.value):
            best[row] = min(obs.value, best.get(row, math.inf))
        else:
            failed.add(row)
    failed -= set(best)
    pending -= set(best) | failed
    success = np.array(sorted(best), dtype=np.int64)
    return Observed(
        success_rows=success,
        log_time=np.log(np.array([best[r] for r in success.tolist()], dtype=np.float64)),
        failed_rows=np.array(sorted(failed), dtype=np.int64),
        pending_rows=np.array(sorted(pending), dtype=np.int64),
    )
