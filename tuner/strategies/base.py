"""The optimizer contract every search strategy implements.

Strategies are rebuilt from history for every coordinator step (the coordinator is stateless and
Postgres is the source of truth), so "tell" is implicit: ``from_history`` receives every
observation so far, in proposal order, and ``ask`` proposes new configs.

Contract (checked for every strategy by tests/tuner/test_strategy_contract.py):
- proposals are valid members of the space (listed values, constraints hold);
- no proposal repeats an observed or pending config, and a batch has no duplicates;
- the same space, history and seed give the same proposals;
- ``ask`` returns fewer than ``n`` configs only when the space is exhausted.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

import numpy as np

from kernelfarm.core.space import Config, SearchSpace
from kernelfarm.core.states import FailureKind
from kernelfarm.tuner.strategies.candidates import candidate_table


@dataclass(frozen=True)
class Observation:
    """One trial as an optimizer sees it.

    ``value`` is the objective (time in ms, lower is better) for a successful trial; ``None`` for a
    failed one (``failure`` says why) and for a pending one (queued or running, ``pending=True``).
    ``source`` names where a warm-start prior observation was measured (its GPU model): times of
    one source share a scale, times of different sources do not. ``origin`` names what proposed
    the config when it was not the strategy's own model (``"llm"``: tuner/strategies/llm.py).
    """

    config: Config
    value: float | None
    failure: FailureKind | None = None
    pending: bool = False
    source: str | None = None
    origin: str | None = None


class Optimizer(ABC):
    """Args common to all strategies:
    space: the job's search space.
    context: problem values the space's constraints may refer to.
    history: observations of this job (and, with warm start, prior ones marked as such by the
        strategy's options), in proposal order.
    seed: makes proposals deterministic.
    options: strategy-specific settings (documented by each strategy).
    prior: warm start: observations from earlier jobs of the same kernel (another problem size
        or GPU model). Never proposed as-is unless unobserved in ``history``; strategies may use
        them to shape their model. Empty for a cold start.
    """

    name: str = "base"

    def __init__(
        self,
        space: SearchSpace,
        context: Mapping[str, Any],
        history: Sequence[Observation],
        seed: int,
        options: Mapping[str, Any] | None = None,
        prior: Sequence[Observation] = (),
    ) -> None:
        self.space = space
        self.context = dict(context)
        self.history = list(history)
        self.seed = seed
        self.options = dict(options or {})
        self.prior = list(prior)
        self.configure()

    def configure(self) -> None:  # noqa: B027 - optional hook
        """Read the strategy's own ``self.options`` (validate them, derive settings, set up state).

        Called once at the end of the constructor. Strategies override this rather than the
        constructor, so its signature (and its type checking) stays in one place.

        Raises:
            InvalidInput: an unknown option or a bad value.
        """

    @classmethod
    def from_history(
        cls,
        space: SearchSpace,
        context: Mapping[str, Any],
        history: Sequence[Observation],
        seed: int,
        options: Mapping[str, Any] | None = None,
        prior: Sequence[Observation] = (),
    ) -> Self:
        return cls(space, context, history, seed, options, prior)

    @abstractmethod
    def ask(self, n: int) -> list[Config]:
        """Propose up to ``n`` new configs.

        Returns:
            Distinct valid configs not in the history; fewer than ``n`` only if the space is exhausted.
        """

    # ---------------------------------------------------------------- helpers shared by strategies
    def candidates(self) -> np.ndarray:
        """Index matrix of valid configs not yet observed or pending (see SearchSpace.valid_indices)."""
        table = candidate_table(self.space, self.context)
        if not self.history:
            return table.indices
        seen = table.rows_of([o.config for o in self.history], self.space.names)
        free = np.ones(len(table), dtype=bool)
        free[seen[seen >= 0]] = False
        return table.indices[free]

    def rng(self) -> np.random.Generator:
        # Seed with the history length too, so successive steps of one job draw fresh numbers
        # while the same (seed, history) always draws the same ones.
        return np.random.default_rng([self.seed & 0xFFFFFFFF, len(self.history)])
