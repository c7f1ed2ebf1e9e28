"""A job's ``strategy_options`` (JSON) read into its strategy's settings dataclass: every name one of
the dataclass's fields, every value of that field's type and in range of what a strategy computes with."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, TypeVar

from kernelfarm.core.errors import InvalidInput

Settings = TypeVar("Settings")

# JSON numbers have no bound, and a strategy hands its options to numpy (int64, float64). Every
# option's sensible values are far inside this; past it, 10**400 would overflow float() and 10**5000
# could not even be printed in the error (Python refuses int-to-text beyond 4,300 digits).
LARGEST_OPTION = 2**31 - 1


def read_options(cls: type[Settings], options: Any, strategy: str) -> Settings:
    """``cls(**options)``, each value checked against the type of the field's default.

    Raises:
        InvalidInput: not an object, an unknown name, a value of the wrong type, or a number that is
            not finite or larger than :data:`LARGEST_OPTION` in magnitude. The message names the option
            and the JSON type sent, never the value (it may be huge).
    """
    require_object(options)
    defaults = cls()
    known = {field.name for field in fields(defaults)}  # type: ignore[arg-type]
    refuse_unknown(options, known, strategy)
    values: dict[str, Any] = {}
    for key, value in options.items():
        kind = type(getattr(defaults, key))
        # bool is an int to Python: a flag takes only a bool, a number never takes one
        wrong = not isinstance(value, bool) if kind is bool else isinstance(value, bool)
        if wrong or not isinstance(value, (int, float) if kind is float else kind):
            raise InvalidInput(f"strategy option {key!r} must be {_json_type(kind())}, not {_json_type(value)}")
        if kind in (int, float) and not _in_range(value):
            raise InvalidInput(f"strategy option {key!r} must be a finite number of magnitude at most {LARGEST_OPTION}")
        values[key] = kind(value)
    return cls(**values)


def require_object(options: Any) -> None:
    """Raises:
    InvalidInput: ``options`` is not a JSON object (a mapping)."""
    if not isinstance(options, Mapping):
        raise InvalidInput(f"strategy_options must be an object, not {_json_type(options)}")


# Names are echoed in the refusal (a typo is found by reading it), cut short: the API takes a body of
# 256 KiB, and one key of that length would otherwise come back whole, into the job's status too.
SHOWN_NAMES, SHOWN_NAME_LENGTH = 5, 64


def refuse_unknown(options: Mapping[Any, Any], known: set[str], strategy: str) -> None:
    """Raises:
    InvalidInput: a name of ``options`` not in ``known``, naming the first few (cut short) and
        every known one."""
    unknown = sorted(str(name) for name in set(options) - known)
    if unknown:
        shown = [name if len(name) <= SHOWN_NAME_LENGTH else name[:SHOWN_NAME_LENGTH] + "..." for name in unknown]
        more = f" and {len(unknown) - SHOWN_NAMES} more" if len(unknown) > SHOWN_NAMES else ""
        listed = f"{shown[:SHOWN_NAMES]}{more}"
        raise InvalidInput(f"unknown options for strategy {strategy!r}: {listed}; known: {sorted(known)}")


def _in_range(value: int | float) -> bool:
    if isinstance(value, int):
        return abs(value) <= LARGEST_OPTION
    return math.isfinite(value) and abs(value) <= LARGEST_OPTION


def _json_type(value: Any) -> str:
    """The JSON name of a value's type, as a client sent it."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "null" if value is None else type(value).__name__
