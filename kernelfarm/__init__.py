"""kernelfarm: the one import name of the farm. The card's folders install beneath it (kernelfarm.api,
kernelfarm.core, ...); the modules here are the command line, the launcher and the embedded stack.

``kernelfarm.Client`` is the typed client of the REST API (kernelfarm/sdk/, docs/CLIENT.md); it is
imported on first use so that the farm's own processes do not load it."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name in ("Client", "BestConfigLookup"):
        from kernelfarm import sdk

        return getattr(sdk, name)
    raise AttributeError(f"module 'kernelfarm' has no attribute {name!r}")
