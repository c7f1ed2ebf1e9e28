"""What PostgreSQL can store of text that tools wrote: no NUL characters.

PostgreSQL rejects the NUL character in ``text`` columns and ``\\u0000`` in ``jsonb``; compiler
logs sometimes carry one (ptxas' "uses too much shared data" report on an H100 did). A write that
held one failed, the worker retried it as a database outage and the trial ended as a lost worker
three attempts later. Every store function that writes text a tool produced passes it through
:func:`storable` first.
"""

from __future__ import annotations

from typing import Any, TypeVar

# U+2400 SYMBOL FOR NULL: visible where the NUL was, so a log keeps its shape.
NUL_MARK = "\u2400"

T = TypeVar("T")


def storable(value: T) -> T:
    """``value`` with every NUL in its strings (dict keys too, at any depth) replaced by
    :data:`NUL_MARK`; numbers, booleans and None pass unchanged."""
    return _clean(value)


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", NUL_MARK) if "\x00" in value else value
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_clean(v) for v in value)
    return value
