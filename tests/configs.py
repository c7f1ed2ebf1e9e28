"""Typed reads of a config's values: a Config's values are typed as any of int, float and str."""

from __future__ import annotations

from kernelfarm.core.space import Config


def integer(config: Config, name: str) -> int:
    """The value of an integer parameter."""
    value = config[name]
    assert isinstance(value, int), f"{name}={value!r} is not an integer"
    return value
