"""Text from config files, exports and the farm, made safe for the gate's one-line errors and its
reports. Any of it may hold a line break, a control character or a lone surrogate (JSON's
``"\\ud800"``): each would split an error over lines, break a markdown table row, make the JUnit
XML unparseable, or make the report unwritable as UTF-8. Such characters are shown as Python
escapes (``\\n``, ``\\x01``, ``\\ud800``) rather than dropped, so the reader still sees what the
value held."""

from __future__ import annotations

import re

# C0 and C1 controls (newline, tab, NUL, ESC ...), the Unicode line and paragraph separators (which
# renderers break lines at) and lone surrogates (which no UTF-8 file can hold).
_LINE_BREAKING = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
# Everything outside XML 1.0's Char production: most C0 controls, surrogates, U+FFFE and U+FFFF.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def one_line(text: str) -> str:
    """``text`` with every line break, control character and lone surrogate escaped."""
    return _LINE_BREAKING.sub(_escape, text)


def xml_text(text: str) -> str:
    """``text`` with every character XML 1.0 cannot hold escaped; tabs and line breaks are kept."""
    return _NOT_XML.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    return ascii(match.group())[1:-1]  # '\x01' -> \x01, '\n' -> \n, '\ud800' -> \ud800
