"""``csv``: a job's trials, one row each, in proposal order; parameters as columns.

Cells follow OWASP's advice on CSV injection, as the dashboard's "Download CSV" does
(api/ui/static/js/job.js ``csvValue``): a spreadsheet runs a text cell that begins with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return as a formula (``=HYPERLINK(...)``), so such a *string* gets
a leading ``'``; numbers are written as they are (``-1.5`` stays a number). A cell with a comma, a
quote, a CR or an LF is quoted (RFC 4180). The json formats (kernel_tuner, t4) carry the raw strings.
"""

from __future__ import annotations

from typing import Any

from kernelfarm.core.exports.model import TrialsExport

FIXED_COLUMNS = ("seq", "config_key", "state", "time_ms", "time_p20_ms", "time_p80_ms", "verified", "failure_kind")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# Python's csv.writer quotes only the line terminator's characters: with "\n" rows, a bare "\r"
# stayed unquoted, and readers that take CR as a line end split the row there.
NEEDS_QUOTES = (",", '"', "\r", "\n")


def write(export: TrialsExport) -> str:
    rows: list[list[Any]] = [[*FIXED_COLUMNS, *export.parameters]]
    for t in export.trials:
        rows.append([
            t.seq, t.config_key, t.state, _num(t.time_ms), _num(t.time_p20_ms), _num(t.time_p80_ms),
            "true" if t.verified else "false", t.failure_kind or "", *(t.config.get(p, "") for p in export.parameters),
        ])  # fmt: skip
    return "".join(",".join(cell(value) for value in row) + "\n" for row in rows)


def cell(value: Any) -> str:
    """``value`` as one CSV cell: a string that a spreadsheet would run as a formula behind a ``'``,
    then quoted where it needs to be."""
    text = "" if value is None else str(value)
    if isinstance(value, str) and text.startswith(FORMULA_STARTS):
        text = "'" + text
    if any(ch in text for ch in NEEDS_QUOTES):
        return '"' + text.replace('"', '""') + '"'
    return text


def _num(value: float | None) -> float | str:
    # A number, not its text: the formula guard leaves numbers alone.
    return "" if value is None else value
