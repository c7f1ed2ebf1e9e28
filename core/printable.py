"""Text from config files, exports and servers, made safe for one-line errors, for reports and for a
terminal; and pydantic's refusals on one line. Any of that text may hold a line break, a control
character, an invisible character or a lone surrogate (JSON's ``"\\ud800"``): each would split an error
over lines, break a markdown table row, make JUnit XML unparseable, make a report unwritable as UTF-8,
or (an escape sequence) retitle, clear or recolour the terminal it is printed on. Such characters are
shown as Python escapes (``\\n``, ``\\x01``, ``\\u200b``, ``\\ud800``) rather than dropped, so the reader
still sees what the value held. The CI gate (kernelfarm/gate/), the SDK's client
(kernelfarm/sdk/client.py), the model profiler, the worker's refusals of malformed task messages
(worker/tasks.py) and `kernelfarm kernel` (terminal_text) word their text with it: in core, so every
layer may."""

from __future__ import annotations

import re

from pydantic import ValidationError
from pydantic_core import ErrorDetails

# Everything outside XML 1.0's Char production: most C0 controls, surrogates, U+FFFE and U+FFFF.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# The most of a refused value an error quotes: the error must stay one readable line.
QUOTED_VALUE_CHARS = 60
# Error types whose message says it all: a missing or an unexpected field names itself, and a
# validator's own message (value_error) quotes what it refused where that helps.
_SAYS_ITSELF = ("missing", "extra_forbidden", "value_error")


def one_line(text: str) -> str:
    """``text`` with every character ``str.isprintable`` refuses but the space escaped: line breaks and
    other controls, the line and paragraph separators, invisible format characters, lone surrogates."""
    return text if text.isprintable() else "".join(ch if ch.isprintable() or ch == " " else _escape(ch) for ch in text)


def terminal_text(text: str) -> str:
    """``text``, which may run over lines, made safe to print on a terminal: line breaks and tabs are
    kept, every other character :func:`one_line` escapes is escaped as it does. Text a server sent or an
    upload held (a kernel's description) printed raw let an escape sequence retitle the terminal, clear
    it or recolour what followed, and a carriage return overwrite a line already shown."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in " \n\t" else _escape(ch) for ch in text)


def xml_text(text: str) -> str:
    """``text`` with every character XML 1.0 cannot hold escaped; tabs and line breaks are kept."""
    return _NOT_XML.sub(lambda match: _escape(match.group()), text)


def quoted(value: object) -> str:
    """``value``'s repr (one line: repr escapes line breaks), cut to QUOTED_VALUE_CHARS."""
    shown = repr(value)
    return shown if len(shown) <= QUOTED_VALUE_CHARS else shown[: QUOTED_VALUE_CHARS - 3] + "..."


def listed(items: list[str], most: int | None = None, separator: str = "; ") -> str:
    """``items`` joined by ``separator``; beyond ``most`` of them, how many more."""
    if most is None or len(items) <= most:
        return separator.join(items)
    return separator.join(items[:most]) + f" (and {len(items) - most} more)"


def validation_reasons(exc: ValidationError, subject: str, most: int | None = None) -> str:
    """Every error pydantic found (the first ``most``), on one line: ``field: reason`` with the value
    refused, joined by ``;``; ``subject`` stands for the field path of an error about the whole input.
    pydantic's own message is many lines: a header, then each field and its reason on lines of their own."""
    return listed([one_line(_reason(error, subject)) for error in exc.errors(include_url=False)], most)


def _reason(error: ErrorDetails, subject: str) -> str:
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]).lstrip(".")
    reason = error["msg"].removeprefix("Value error, ")
    reason = reason[:1].lower() + reason[1:]
    value = error.get("input")
    # A table's or a list's contents would not fit on the line.
    if error["type"] not in _SAYS_ITSELF and not isinstance(value, dict | list):
        reason += f", got {quoted(value)}"
    return f"{where or subject}: {reason}"


def _escape(char: str) -> str:
    return ascii(char)[1:-1]  # '\x01' -> \x01, '\n' -> \n, '\ud800' -> \ud800
