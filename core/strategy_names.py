"""Names of the search strategies, known to the API without importing the coordinator.

The strategies themselves live in tuner/strategies/ (registry.py implements exactly these names;
tests/tuner/test_strategy_contract.py keeps the two in step). This module holds only their names,
hence its name: core must not import the tuner (tests/test_layering.py), yet the API validates a
job's strategy before any coordinator sees it.
"""

from __future__ import annotations

STRATEGY_NAMES: tuple[str, ...] = ("bayes", "bayes_llm", "genetic", "random")
DEFAULT_STRATEGY = "bayes"
