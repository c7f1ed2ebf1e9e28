"""A steady-state genetic algorithm: the strong model-free baseline.

Generational GAs keep a population between steps; the coordinator keeps nothing, so this one is
steady-state: the population is re-derived from history on every ask as the ``population`` best
successful configs, and each proposal is a child of two tournament-selected parents (uniform
crossover, then per-gene mutation that mostly steps to an adjacent value, as kernel parameters are
ordered). Failed configs never become parents. Children that are invalid, already observed or
pending, or already in the batch are redrawn; after too many redraws a random free config is used,
so the contract (valid, distinct, fewer only when exhausted) always holds.
"""

from __future__ import annotations

import numpy as np

from kernelfarm.core.space import Config
from kernelfarm.core.strategy_options.genetic import GeneticSettings
from kernelfarm.tuner.strategies.base import Optimizer
from kernelfarm.tuner.strategies.candidates import CandidateTable, candidate_table, configs_at
from kernelfarm.tuner.strategies.observed import observe

ATTEMPTS = 50


class GeneticAlgorithm(Optimizer):
    """Options: see :class:`~kernelfarm.core.strategy_options.genetic.GeneticSettings`."""

    name = "genetic"

    def configure(self) -> None:
        super().configure()
        self.settings = GeneticSettings.from_options(self.options, self.name)

    def ask(self, n: int) -> list[Config]:
        table = candidate_table(self.space, self.context)
        observed = observe(table, self.space, self.history)
        free = np.ones(len(table), dtype=bool)
        free[observed.seen_rows] = False
        n = min(n, int(free.sum()))
        if n <= 0:
            return []
        rng = self.rng()
        size = self.settings.population
        parents = observed.success_rows[np.argsort(observed.log_time, kind="stable")[:size]]
        chosen: list[int] = []
        for _ in range(n):
            row = -1
            if observed.n_done >= size and len(parents) >= 2:
                row = self._child(table, parents, free, rng)
            if row < 0:
                row = int(rng.choice(np.flatnonzero(free)))
            free[row] = False
            chosen.append(row)
        return configs_at(self.space, table, chosen)

    def _child(self, table: CandidateTable, parents: np.ndarray, free: np.ndarray, rng: np.random.Generator) -> int:
        genes = table.indices[parents]  # (p, P), rank order: row 0 is the best
        sizes = table.sizes
        mutable = np.flatnonzero(sizes > 1)
        rate = self.settings.mutation or 1.0 / max(len(mutable), 1)
        tournament = self.settings.tournament
        for _ in range(ATTEMPTS):
            a, b = (int(rng.integers(len(parents), size=tournament).min()) for _ in range(2))
            if a == b:
                continue
            child = np.where(rng.random(len(sizes)) < 0.5, genes[a], genes[b]).astype(np.int64)
            for j in mutable[rng.random(len(mutable)) < rate]:
                if rng.random() < 0.7:  # a step to an adjacent value
                    child[j] = int(np.clip(child[j] + rng.choice((-1, 1)), 0, sizes[j] - 1))
                else:
                    child[j] = int(rng.integers(sizes[j]))
            row = int(table.position(np.array([int(child @ table.radix)], dtype=np.int64))[0])
            if row >= 0 and free[row]:
                return row
        return -1
