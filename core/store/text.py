"""What PostgreSQL can store of text that tools wrote: no NUL characters.

PostgreSQL rejects the NUL character in ``text`` columns and ``\\u0000`` in ``jsonb``; compiler
logs sometimes carry one (ptxas' "uses too much shared data" report on an H100 did). A write that
held one failed, the worker retried it as a database outage and the trial ended as a lost worker
three attempts later. Every store function that writes text a tool produced passes it through
:func:`storable` first.
"""

from __future__ import annotations

import math
import unicodedata
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


def unstorable(value: Any, path: str, max_depth: int | None) -> str | None:
    """Why ``value`` (parsed JSON a client sent) cannot be stored and read back, naming where: a NUL
    or a lone surrogate in a string or key (PostgreSQL refuses both, and a reply cannot encode the
    second), a non-finite number (JSON has none), nesting deeper than ``max_depth`` (None: any depth).
    None: it can be. For input to refuse with a reason; text a tool wrote goes through :func:`storable`
    instead."""
    stack: list[tuple[str, Any, int]] = [(path, value, 0)]
    while stack:
        where, item, depth = stack.pop()
        if max_depth is not None and depth > max_depth:
            return f"{where}: nested deeper than {max_depth} levels"
        if isinstance(item, dict):
            for key, child in item.items():
                reason = text_problem(str(key))
                if reason:
                    return f"{where} key {str(key)[:40]!r}: {reason}"
                stack.append((f"{where}.{key}", child, depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((f"{where}.{index}", child, depth + 1) for index, child in enumerate(item))
        elif isinstance(item, str):
            reason = text_problem(item)
            if reason:
                return f"{where}: {reason}"
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{where}: {item} is not a finite number"
    return None


def text_problem(text: str) -> str | None:
    """Why PostgreSQL or a JSON reply cannot hold ``text``, or None."""
    if "\x00" in text:
        return "contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (not a Unicode character)"
    return None


# Control, format (zero-width space, right-to-left override, ...), separator and unassigned characters.
_INVISIBLE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def invisible_character(text: str) -> str | None:
    """``U+XXXX`` of the first character of ``text`` that prints as nothing or reorders the text
    around it (a control or format character, a line separator, an unassigned code point), or None.
    Names and labels a page or a terminal shows must not hold one: "alice" followed by a zero-width
    space reads as "alice", and a right-to-left override shows the rest of a title reversed."""
    for char in text:
        if unicodedata.category(char) in _INVISIBLE:
            return f"U+{ord(char):04X}"
    return None
