"""The worked example of docs/EXTENDING.md: local search around the fastest config found so far.

Copied to ``tuner/strategies/local_search.py`` and registered (tuner/strategies/registry.py,
core/strategy_names.py, core/strategy_options/__init__.py), it passes tests/tuner/test_strategy_contract.py
with every other strategy.
"""

from __future__ import annotations

import numpy as np

from kernelfarm.core.space import Config
from kernelfarm.core.strategy_options import NoOptions
from kernelfarm.tuner.strategies.base import Optimizer


class LocalSearch(Optimizer):
    """Proposes the valid, unobserved configs that change the fewest parameters of the fastest config
    so far (ties in random order); random configs until a trial has succeeded. No options."""

    name = "local"

    def configure(self) -> None:
        super().configure()
        NoOptions.from_options(self.options, self.name)  # an option sent to it is refused, not ignored

    def ask(self, n: int) -> list[Config]:
        pool = self.candidates()  # index rows of valid configs neither observed nor pending
        if len(pool) == 0 or n <= 0:
            return []
        order = self.rng().permutation(len(pool))  # deterministic for (seed, history)
        # Successes inside the space: a history may hold configs of an older version of the space.
        timed = [(o.value, o.config) for o in self.history
                 if o.value is not None and self.space.contains(o.config, self.context)]  # fmt: skip
        if timed:
            _, best = min(timed, key=lambda pair: pair[0])
            centre = np.array([p.values.index(best[p.name]) for p in self.space.parameters])
            changed = (pool[order] != centre).sum(axis=1)
            order = order[np.argsort(changed, kind="stable")]
        return [self.space.config_at(pool[i]) for i in order[:n]]
