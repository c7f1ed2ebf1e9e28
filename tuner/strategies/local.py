"""The local arm of ``bayes``: when the incumbent has stopped improving, some proposals go to its
untried one-parameter neighbours.

Why: on the recorded landscapes the model-based search is bimodal. A run either finds the
optimum's region or settles on a config that is good, not best, and spends its remaining budget
elsewhere; on pnpoly_RTX_3090, two of ten runs ended at 0.951 of the optimum with a config within
0.97 one parameter away, never proposed in 90 evaluations because the model ranked it low (issue
17, docs/benchmarks/STRATEGIES.md, "seventh session").

What it costs is bounded: nothing while the incumbent keeps improving (every proposal is the
model's), then one proposal in ``every`` once ``after`` evaluations have passed without a better
config. Which neighbour: the model's choice among them (its acquisition), so the local step is
the most promising of the moves, not a random one. The quota is rebuilt from the history alone
(the strategy is rebuilt at every coordinator step): local steps already taken are the
evaluations since the incumbent that are its neighbours, whoever proposed them.

Options, off by default (issue 17, twelfth and thirteenth sessions): ``tolerance`` (a gain too
small to end the stall: a run creeping along a plateau), ``pairs`` (two switches flipped at once:
where either flip alone is a cliff) and ``cliff`` (with ``pairs``, a pair only once both its
single flips are measured).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kernelfarm.tuner.strategies.base import Observation
from kernelfarm.tuner.strategies.candidates import CandidateTable, switch_pairs


def incumbent_index(history: Sequence[Observation]) -> int | None:
    """Position in ``history`` of the first trial with the best measured time (None: none yet)."""
    best, where = np.inf, None
    for i, obs in enumerate(history):
        if not obs.pending and obs.failure is None and obs.value is not None and obs.value < best:
            best, where = obs.value, i
    return where


def plateau_start(history: Sequence[Observation], where: int, tolerance: float) -> int:
    """Position of the first measured trial within ``tolerance`` (a fraction) of the incumbent at
    ``where``: a run that creeps along a plateau (0.673 -> 0.675 of the optimum) has stalled since
    it reached the plateau, not since its last hair's-breadth gain."""
    best = history[where].value
    if tolerance <= 0 or best is None:
        return where
    for i, obs in enumerate(history[: where + 1]):
        if not obs.pending and obs.failure is None and obs.value is not None and obs.value <= best * (1 + tolerance):
            return i
    return where


def pair_moves(
    table: CandidateTable, history: Sequence[Observation], rows: np.ndarray, where: int, cliff: bool
) -> np.ndarray:
    """The two-switch moves from the incumbent at ``where`` (``rows``: each history entry's table
    row). ``cliff``: only the pairs whose single flips are both measured (or not valid): the
    single flips come first, and a pair is tried where neither alone paid, so pairs do not take
    the steps of single flips that would have paid late in a run."""
    tried = None
    if cliff:
        done = np.array([not obs.pending for obs in history], dtype=bool)
        tried = rows[done & (rows >= 0)]
    return switch_pairs(table, rows[where : where + 1], tried)


def stalled_evaluations(history: Sequence[Observation]) -> int:
    """Completed evaluations since the incumbent was measured (0 while there is none)."""
    where = incumbent_index(history)
    return 0 if where is None else _completed_after(history, where)


def _completed_after(history: Sequence[Observation], where: int) -> int:
    return sum(1 for obs in history[where + 1 :] if not obs.pending)


def local_steps_due(
    table: CandidateTable,
    history: Sequence[Observation],
    rows: np.ndarray,
    after: int,
    every: int,
    tolerance: float = 0.0,
    pairs: bool = False,
    cliff: bool = False,
) -> tuple[int, np.ndarray]:
    """How many proposals of this ask go to the incumbent's neighbours, and those neighbours.

    ``tolerance``: a gain smaller than this fraction does not end a stall (plateau_start).
    ``pairs``: the neighbours also include the incumbent's two-switch moves (two two-valued
    parameters flipped at once, candidates.switch_pairs); with ``cliff``, only those whose two
    single flips are measured (pair_moves).

    ``rows``: each history entry's table row. ``after``: completed evaluations without a better
    config before the first local step; then one step per ``every`` evaluations. Steps already
    taken (neighbours of the incumbent measured or pending since it, or its plateau, was
    reached) count against the quota. ``after`` 0 turns the arm off.
    """
    empty = np.zeros(0, dtype=np.int64)
    where = incumbent_index(history)
    if after <= 0 or where is None or rows[where] < 0:
        return 0, empty
    start = plateau_start(history, where, tolerance)
    stalled = _completed_after(history, start)
    if stalled < after:
        return 0, empty
    neighbours = table.neighbours(np.array([rows[where]], dtype=np.int64))
    if pairs:
        neighbours = np.union1d(neighbours, pair_moves(table, history, rows, where, cliff))
    taken = int(np.isin(rows[start + 1 :], neighbours).sum())
    allowed = 1 + (stalled - after) // max(every, 1)
    return max(0, allowed - taken), neighbours
