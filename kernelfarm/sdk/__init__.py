"""The farm from users' code: a typed REST client (:class:`Client`), a runtime best-config lookup
(:class:`BestConfigLookup`) and a drop-in for ``triton.autotune`` (:func:`autotune`). docs/CLIENT.md."""

from __future__ import annotations

from kernelfarm.sdk.client import Client, WaitTimeout
from kernelfarm.sdk.lookup import BestConfigLookup, LookupMiss
from kernelfarm.sdk.results import BestConfig, Job, Kernel, ParetoPoint, Trial, WarmStartPrior

__all__ = [
    "BestConfig", "BestConfigLookup", "Client", "Job", "Kernel", "LookupMiss", "ParetoPoint", "Trial", "WaitTimeout",
    "WarmStartPrior",
]  # fmt: skip
