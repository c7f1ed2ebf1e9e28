"""Names of the search strategies, known to the API without importing the coordinator.

tuner/optimizers/registry.py implements exactly these; a test keeps the two in step.
"""

from __future__ import annotations

STRATEGY_NAMES: tuple[str, ...] = ("random",)
DEFAULT_STRATEGY = "random"
