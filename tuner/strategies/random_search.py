"""Uniform random sampling of the valid, unobserved configs: the baseline every strategy must beat."""

from __future__ import annotations

from kernelfarm.core.space import Config
from kernelfarm.core.strategy_options import NoOptions
from kernelfarm.tuner.strategies.base import Optimizer


class RandomSearch(Optimizer):
    name = "random"

    def configure(self) -> None:
        super().configure()
        NoOptions.from_options(self.options, self.name)  # refused, not ignored

    def ask(self, n: int) -> list[Config]:
        pool = self.candidates()
        if len(pool) == 0 or n <= 0:
            return []
        chosen = self.rng().choice(len(pool), size=min(n, len(pool)), replace=False)
        return [self.space.config_at(pool[i]) for i in chosen]
