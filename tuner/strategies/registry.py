"""Strategy names → classes. The default strategy is the best one measured (docs/BENCHMARKS.md)."""

from __future__ import annotations

from kernelfarm.core.errors import InvalidInput
from kernelfarm.tuner.strategies.base import Optimizer
from kernelfarm.tuner.strategies.bayes import BayesianOptimizer
from kernelfarm.tuner.strategies.bayes_llm import LLMAssistedBayes
from kernelfarm.tuner.strategies.genetic import GeneticAlgorithm
from kernelfarm.tuner.strategies.random_search import RandomSearch

STRATEGIES: dict[str, type[Optimizer]] = {
    BayesianOptimizer.name: BayesianOptimizer,
    LLMAssistedBayes.name: LLMAssistedBayes,
    GeneticAlgorithm.name: GeneticAlgorithm,
    RandomSearch.name: RandomSearch,
}
DEFAULT_STRATEGY = BayesianOptimizer.name


def get_strategy(name: str) -> type[Optimizer]:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise InvalidInput(f"unknown strategy {name!r}; available: {sorted(STRATEGIES)}") from None
