"""``csv``: a job's trials, one row each, in proposal order; parameters as columns."""

from __future__ import annotations

import csv
import io

from kernelfarm.core.exports.model import TrialsExport

FIXED_COLUMNS = ("seq", "config_key", "state", "time_ms", "time_p20_ms", "time_p80_ms", "verified", "failure_kind")


def write(export: TrialsExport) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*FIXED_COLUMNS, *export.parameters])
    for t in export.trials:
        writer.writerow([
            t.seq, t.config_key, t.state, _num(t.time_ms), _num(t.time_p20_ms), _num(t.time_p80_ms),
            "true" if t.verified else "false", t.failure_kind or "", *(t.config.get(p, "") for p in export.parameters),
        ])  # fmt: skip
    return out.getvalue()


def _num(value: float | None) -> str:
    return "" if value is None else repr(value)
