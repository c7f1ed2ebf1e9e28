"""Each search strategy's options (``job.strategy_options``): read by the strategy as it is built,
and checked by the API as a job is submitted, so a job the strategy would refuse is refused with the
reason (HTTP 422) instead of being accepted and never advancing. Here, not in tuner/strategies/, for
the same reason as the names (strategy_names.py): the API does not import the tuner.
tests/tuner/test_strategy_contract.py checks that every strategy reads its options from here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.strategy_names import STRATEGY_NAMES
from kernelfarm.core.strategy_options.bayes import BayesSettings
from kernelfarm.core.strategy_options.bayes_llm import read_llm_options
from kernelfarm.core.strategy_options.genetic import GeneticSettings
from kernelfarm.core.strategy_options.reading import read_options


@dataclass(frozen=True)
class NoOptions:
    """A strategy without options (``random``): any option is refused rather than ignored."""

    @classmethod
    def from_options(cls, options: Mapping[str, Any], strategy: str) -> NoOptions:
        return read_options(cls, options, strategy)


OPTION_READERS: dict[str, Callable[[Mapping[str, Any], str], object]] = {
    "bayes": BayesSettings.from_options,
    "bayes_llm": read_llm_options,
    "genetic": GeneticSettings.from_options,
    "random": NoOptions.from_options,
}


def check_strategy_options(strategy: str, options: Mapping[str, Any]) -> None:
    """Raises:
    InvalidInput: the reason ``strategy`` (one of STRATEGY_NAMES) would refuse ``options``."""
    try:
        read = OPTION_READERS[strategy]
    except KeyError:
        raise InvalidInput(f"unknown strategy {strategy!r}; available: {list(STRATEGY_NAMES)}") from None
    read(options, strategy)
