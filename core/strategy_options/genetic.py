"""The options of the ``genetic`` strategy (tuner/strategies/genetic.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.strategy_options.reading import read_options


@dataclass(frozen=True)
class GeneticSettings:
    """Attributes:
    population: parents are the best this many successful configs; before that many evaluations,
        proposals are uniform random.
    mutation: per-gene mutation probability; 0 means 1 / (number of free parameters).
    tournament: tournament size for parent selection (at most ``population``).
    """

    population: int = 20
    mutation: float = 0.0
    tournament: int = 2

    @classmethod
    def from_options(cls, options: Mapping[str, Any], strategy: str = "genetic") -> GeneticSettings:
        """Raises:
        InvalidInput: an unknown option, a value of the wrong type or out of range."""
        settings = read_options(cls, options, strategy)
        if settings.population < 2:
            raise InvalidInput("strategy option 'population' must be at least 2 (a child needs two parents)")
        # Bounded by the population: each draw allocates ``tournament`` indices, 50 times per child.
        if not 1 <= settings.tournament <= settings.population:
            raise InvalidInput("strategy option 'tournament' must be from 1 to 'population'")
        if not 0 <= settings.mutation <= 1:
            raise InvalidInput("strategy option 'mutation' must be a probability from 0 to 1")
        return settings
