"""The gate's reports: a markdown summary (for ``$GITHUB_STEP_SUMMARY``) and JUnit XML (for any CI's
test view), one test case per entry.

Every cell and XML value comes from a config file, an export or the farm, and may hold anything: a
``|`` or a line break would split a table row, a control character would make the XML unparseable
(core/printable.py)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from kernelfarm.core.printable import one_line, xml_text
from kernelfarm.gate.verdicts import Verdict

FAILING = {"regression": "failure", "best_changed": "failure", "error": "error"}
ICONS = {"pass": "✅ pass", "regression": "❌ regression", "best_changed": "⚠️ best changed", "error": "💥 error"}
_BACKTICK_RUN = re.compile("`+")
# Where a cell's text would start markup rather than show itself: raw HTML and autolinks (``<``: a kernel
# name's ``<img src=...>`` was an image in the summary), entity references (``&``: ``&lt;`` showed as
# ``<``, ``&#x202e;`` reversed the text after it), and a link's or image's target (``](`` of ``[t](url)``).
_MARKUP_START = re.compile(r"[<&]|(?<=\])\(")


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def _cell(text: str) -> str:
    """``text`` as one table cell's text: a backslash escaped first, so that it cannot escape what follows,
    then ``|`` (GFM tables split at an unescaped one), then what would start markup (:data:`_MARKUP_START`)."""
    escaped = one_line(text).replace("\\", "\\\\").replace("|", "\\|")
    return _MARKUP_START.sub(lambda match: "\\" + match.group(), escaped)


def _code(text: str | None) -> str:
    """``text`` as a code span in a table cell (empty for none). Inside a code span a backslash is
    literal, but GFM splits a row at ``|`` before it parses spans, so ``|`` is escaped all the same; the
    fence is one backtick longer than any run inside, as CommonMark requires."""
    if not text:
        return ""
    content = one_line(text).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in _BACKTICK_RUN.findall(content)), default=0) + 1)
    if content[0] in "` " or content[-1] in "` ":  # a span loses one space each side: keep the text's own
        content = f" {content} "
    return f"{fence}{content}{fence}"


def markdown(title: str, verdicts: list[Verdict], run_id: str) -> str:
    failed = sum(v.status != "pass" for v in verdicts)
    lines = [
        f"## {_cell(title)}: {'passed' if not failed else f'{failed} of {len(verdicts)} failed'}",
        "",
        f"Run {_code(run_id)}. Baseline and candidate measured in this run on the same GPU model; "
        "the pinned time is the baseline's recorded number, for reference.",
        "",
        "| entry | status | baseline config | pinned ms | baseline now ms | candidate config | candidate ms "
        "| change | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        change = "" if v.change is None else f"{v.change:+.1%}"
        note = v.message + ("" if not v.toolchain_changes else " — toolchain: " + ", ".join(
            f"{k} {a} → {b}" for k, (a, b) in v.toolchain_changes.items()))  # fmt: skip
        cells = [_cell(v.name), _cell(ICONS.get(v.status, v.status)), _code(v.baseline_config),
                 _cell(_ms(v.baseline_pinned_ms)), _cell(_ms(v.baseline_now_ms)), _code(v.candidate_config),
                 _cell(_ms(v.candidate_ms)), _cell(change), _cell(note)]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _xml(text: str) -> str:
    """One value (an attribute, a one-line text) as XML can hold it."""
    return xml_text(one_line(text))


def junit(suite: str, verdicts: list[Verdict]) -> str:
    root = ET.Element("testsuites")
    failures = sum(FAILING.get(v.status) == "failure" for v in verdicts)
    errors = sum(FAILING.get(v.status) == "error" for v in verdicts)
    node = ET.SubElement(
        root, "testsuite", name=_xml(suite), tests=str(len(verdicts)), failures=str(failures), errors=str(errors)
    )
    for v in verdicts:
        case = ET.SubElement(node, "testcase", classname=_xml(f"{suite}.{v.kernel}"), name=_xml(v.name))
        kind = FAILING.get(v.status)
        if kind is not None:
            ET.SubElement(case, kind, message=_xml(v.message), type=_xml(v.status)).text = _xml(v.message)
        details = {"baseline_config": v.baseline_config, "baseline_now_ms": _ms(v.baseline_now_ms),
                   "candidate_config": v.candidate_config, "candidate_ms": _ms(v.candidate_ms), **v.jobs}  # fmt: skip
        # one line per detail: a value's own line break would make it look like another detail
        ET.SubElement(case, "system-out").text = "\n".join(f"{k}={_xml(val)}" for k, val in details.items() if val)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
