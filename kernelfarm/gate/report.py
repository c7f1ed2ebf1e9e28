"""The gate's reports: a markdown summary (for ``$GITHUB_STEP_SUMMARY``) and JUnit XML (for any CI's
test view), one test case per entry."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from kernelfarm.gate.verdicts import Verdict

FAILING = {"regression": "failure", "best_changed": "failure", "error": "error"}
ICONS = {"pass": "✅ pass", "regression": "❌ regression", "best_changed": "⚠️ best changed", "error": "💥 error"}


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def markdown(title: str, verdicts: list[Verdict], run_id: str) -> str:
    failed = sum(v.status != "pass" for v in verdicts)
    lines = [
        f"## {title}: {'passed' if not failed else f'{failed} of {len(verdicts)} failed'}",
        "",
        f"Run `{run_id}`. Baseline and candidate measured in this run on the same GPU model; "
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
        status = ICONS.get(v.status, v.status)
        lines.append(f"| {v.name} | {status} | `{v.baseline_config or ''}` | {_ms(v.baseline_pinned_ms)} "
                     f"| {_ms(v.baseline_now_ms)} | `{v.candidate_config or ''}` | {_ms(v.candidate_ms)} | {change} "
                     f"| {note.replace('|', '/')} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def junit(suite: str, verdicts: list[Verdict]) -> str:
    root = ET.Element("testsuites")
    failures = sum(FAILING.get(v.status) == "failure" for v in verdicts)
    errors = sum(FAILING.get(v.status) == "error" for v in verdicts)
    node = ET.SubElement(
        root, "testsuite", name=suite, tests=str(len(verdicts)), failures=str(failures), errors=str(errors)
    )
    for v in verdicts:
        case = ET.SubElement(node, "testcase", classname=f"{suite}.{v.kernel}", name=v.name)
        kind = FAILING.get(v.status)
        if kind is not None:
            ET.SubElement(case, kind, message=v.message, type=v.status).text = v.message
        details = {"baseline_config": v.baseline_config, "baseline_now_ms": _ms(v.baseline_now_ms),
                   "candidate_config": v.candidate_config, "candidate_ms": _ms(v.candidate_ms), **v.jobs}  # fmt: skip
        ET.SubElement(case, "system-out").text = "\n".join(f"{k}={val}" for k, val in details.items() if val)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
