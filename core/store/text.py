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

# Default_Ignorable_Code_Point, from Unicode's DerivedCoreProperties.txt (inclusive ranges): code points a
# renderer shows as nothing. Most are Cf or Cn, but not all: the Hangul fillers are letters (Lo), the
# combining grapheme joiner, the Khmer inherent vowels and the variation selectors are marks (Mn), so
# "alice" followed by U+3164 passed a check of categories alone and printed as "alice".
DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),  # SOFT HYPHEN
    (0x034F, 0x034F),  # COMBINING GRAPHEME JOINER
    (0x061C, 0x061C),  # ARABIC LETTER MARK
    (0x115F, 0x1160),  # HANGUL CHOSEONG FILLER, HANGUL JUNGSEONG FILLER
    (0x17B4, 0x17B5),  # KHMER VOWEL INHERENT AQ, AA
    (0x180B, 0x180F),  # MONGOLIAN FREE VARIATION SELECTORS, MONGOLIAN VOWEL SEPARATOR
    (0x200B, 0x200F),  # ZERO WIDTH SPACE .. RIGHT-TO-LEFT MARK
    (0x202A, 0x202E),  # LEFT-TO-RIGHT EMBEDDING .. RIGHT-TO-LEFT OVERRIDE
    (0x2060, 0x206F),  # WORD JOINER .. NOMINAL DIGIT SHAPES
    (0x3164, 0x3164),  # HANGUL FILLER
    (0xFE00, 0xFE0F),  # VARIATION SELECTOR-1 .. 16
    (0xFEFF, 0xFEFF),  # ZERO WIDTH NO-BREAK SPACE
    (0xFFA0, 0xFFA0),  # HALFWIDTH HANGUL FILLER
    (0xFFF0, 0xFFF8),  # reserved
    (0x1BCA0, 0x1BCA3),  # SHORTHAND FORMAT LETTER OVERLAP .. UP STEP
    (0x1D173, 0x1D17A),  # MUSICAL SYMBOL BEGIN BEAM .. END PHRASE
    (0xE0000, 0xE0FFF),  # tags, VARIATION SELECTOR-17 .. 256, reserved
)
# Not default-ignorable, yet blank by design (a braille cell with no dots, a notehead that is not drawn):
# a name holding one prints as that name with a space, or as nothing at all.
BLANK: tuple[tuple[int, int], ...] = (
    (0x2800, 0x2800),  # BRAILLE PATTERN BLANK (So)
    (0x1D159, 0x1D159),  # MUSICAL SYMBOL NULL NOTEHEAD (So)
)
_INVISIBLE_CODE_POINTS = frozenset(code for low, high in DEFAULT_IGNORABLE + BLANK for code in range(low, high + 1))
# Space separators other than the space itself (no-break, en/em, ideographic spaces, ...) print as one:
# "alice\u00a0bob" reads as "alice bob", another name.
_SPACE = " "


def invisible_character(text: str) -> str | None:
    """``U+XXXX`` of the first character of ``text`` that prints as nothing, as a space other than the
    space, or reorders the text around it, or None: a control or format character, a line or paragraph
    separator, an unassigned code point, a default-ignorable one (:data:`DEFAULT_IGNORABLE`), a blank one
    (:data:`BLANK`), a space separator other than U+0020. Names and labels a page or a terminal shows must
    not hold one: "alice" followed by a zero-width space or a Hangul filler reads as "alice", and a
    right-to-left override shows the rest of a title reversed."""
    for char in text:
        category = unicodedata.category(char)
        if category in _INVISIBLE or ord(char) in _INVISIBLE_CODE_POINTS or (category == "Zs" and char != _SPACE):
            return f"U+{ord(char):04X}"
    return None
