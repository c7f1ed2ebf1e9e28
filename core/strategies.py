"""Names of the search strategies, known to the API without importing the coordinator.

tuner/optimizers/registry.py implements exactly these; tests/tuner/test_optimizer_contract.py
keeps the two in step.
"""

from __future__ import annotations

STRATEGY_NAMES: tuple[str, ...] = ("bayes", "genetic", "random")
DEFAULT_STRATEGY = "bayes"
