"""The report's outputs: a rich table for the terminal, JSON, and a self-contained HTML page.

The HTML page draws its bar chart as inline SVG: it loads nothing from anywhere (GPU nodes are
air-gapped) and opens from a file.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kernelfarm.core.printable import one_line
from kernelfarm.model_profiler.analysis import OperatorReport, ProfileReport
from kernelfarm.model_profiler.output import write_text

TOP = 15


def _shapes(op: OperatorReport) -> str:
    return " ".join("x".join(map(str, shape)) for shape in op.input_shapes if shape) or "-"


def print_table(report: ProfileReport, console: Console, top: int = TOP) -> None:
    """The report on the terminal. Every name in it (the operators' and kernels' from the profiler, which
    a model's ``record_function("...")`` ranges set; the farm's statuses) is printed as text: a "[/]" in
    one was read as rich markup and ended the command with a traceback before ``--store``), on one line
    with its control and invisible characters escaped (printable.one_line: no terminal escape sequence,
    no right-to-left override)."""
    time_kind = "self CUDA" if report.device == "cuda" else "self CPU"
    console.print(
        Text.assemble(
            (one_line(report.model), "bold"),
            f" {report.dtype} batch {report.batch} x {report.seq} on {one_line(report.device_name)}: "
            f"{report.latency_ms:.2f} ms per inference unprofiled",
        )
    )

    def say(line: str) -> None:
        console.print(one_line(line), markup=False, emoji=False)

    for line in timing_lines(report):
        say(line)
    table = Table(show_lines=False)
    for column in ("operator", "input shapes", "calls", f"{time_kind} ms", "share", "TFLOP/s", "GB/s", "class",
                   "kernels"):  # fmt: skip
        table.add_column(column, overflow="fold")
    for op in report.operators[:top]:
        table.add_row(
            *(
                Text(one_line(cell))
                for cell in (
                    op.name,
                    _shapes(op),
                    str(op.calls),
                    f"{op.self_ms:.3f}",
                    f"{op.share:.1%}",
                    f"{op.tflops_per_s:.1f}",
                    f"{op.gb_per_s:.0f}",
                    op.bound,
                    ", ".join(k[:40] for k in op.kernels[:2]),
                )
            )
        )
    console.print(table)
    for line in report.hints + [f"{op.name}: {op.hint}" for op in report.operators[:top] if op.hint]:
        say(f"hint: {line}")
    if report.compile_ab:
        ab = report.compile_ab
        say(
            f"torch.compile: eager {ab['eager_ms']:.2f} ms, compiled {ab['compiled_ms']:.2f} ms "
            f"({ab['speedup']:.2f}x) after {ab['compile_s']:.1f} s of compiling"
        )
    for entry in report.tuning or []:
        say(
            f"tuned {entry['operator']} {entry['problem']} with {entry['kernel'] or '-'}: "
            f"{entry.get('baseline_ms', 0):.3f} → {entry.get('tuned_ms') or float('nan'):.3f} ms ({entry['status']})"
        )
    if report.swap:
        say(
            f"swapped in: end to end {report.swap['baseline_ms']:.2f} → {report.swap['swapped_ms']:.2f} ms "
            f"({report.swap['speedup']:.2f}x), max error {report.swap['max_abs_error']:.3g} "
            f"({'match' if report.swap['outputs_match'] else 'MISMATCH'})"
        )
        if (check := output_check_line(report.swap)) is not None:
            say(f"outputs: {check}")


def output_check_line(swap: dict[str, Any]) -> str | None:
    """The swapped and the eager model's errors against the check's reference, and the bounds (None for
    a report without them: no swap measured, or a report from before the float32 check)."""
    names = ("eager_rel_l2_vs_float32", "swapped_rel_l2_vs_float32", "rel_l2_tolerance", "eager_max_abs_vs_float32",
             "swapped_max_abs_vs_float32", "max_abs_tolerance")  # fmt: skip
    values = [swap.get(name) for name in names]
    if not all(isinstance(value, float | int) for value in values):
        return None
    eager_rel, swapped_rel, rel_bound, eager_max, swapped_max, max_bound = values
    return (
        f"against {swap.get('reference', 'the reference')}: relative L2 error swapped {swapped_rel:.3g}, eager "
        f"{eager_rel:.3g} (bound {rel_bound:.3g}); largest element error swapped {swapped_max:.3g}, eager "
        f"{eager_max:.3g} (bound {max_bound:.3g})"
    )


def timing_lines(report: ProfileReport) -> list[str]:
    """What was timed, the profiled run against the unprofiled one, and where the latency goes."""
    timing = report.timing or {}
    lines = [
        f"profiled (timed pass: {timing.get('timed_pass', 'one pass')}; {timing.get('rounds', 1)} sessions of "
        f"{timing.get('iterations', '?')} inferences between unprofiled blocks): median {report.profiled_ms:.2f} ms, "
        f"overhead {report.profiling_overhead:+.1%} over unprofiled (each session against the blocks around it); "
        f"rows attributed {timing.get('attribution', '-')} to the recorded inference "
        f"({timing.get('recorded_ms', float('nan')):.2f} ms with shapes)"
    ]
    what = "kernels (device busy)" if report.device == "cuda" else "operators' self CPU time"
    line = (
        f"the table accounts for {report.accounted_ms:.2f} ms in {what} = "
        f"{report.accounted_ms / report.latency_ms if report.latency_ms else 0:.0%} of the latency"
    )
    if timing.get("device_span_ms") is not None:
        line += (
            f"; in the timed inference the device idled {timing['device_idle_in_span_ms']:.2f} ms between kernels "
            f"(launch gaps) and {timing['outside_span_ms']:.2f} ms before the first / after the last one"
        )
    return [*lines, line]


def _md_text(text: object, cell: bool = False) -> str:
    """Text in markdown as it reads: on one line (printable.one_line), no HTML (a name's "<img ...>" is
    shown, not rendered), and in a table cell no "|" that would end the cell."""
    line = html.escape(one_line(str(text)), quote=False)
    return line.replace("|", "\\|") if cell else line


def _md_code(text: str, cell: bool = False) -> str:
    """``text`` as a code span: fenced by more backticks than it holds in a row (an operator's name with a
    backtick ended the span), on one line, and in a table cell with its "|" escaped (GFM reads it so even
    inside the span)."""
    line = one_line(text)
    if cell:
        line = line.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall("`+", line)), default=0) + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{fence}{pad}{line}{pad}{fence}"


def write_markdown(report: ProfileReport, path: Path, top: int = TOP) -> None:
    """The report as markdown: headline figures, the top operators, hints, and the tuning loop's outcome."""
    time_kind = "self CUDA ms" if report.device == "cuda" else "self CPU ms"
    lines = [
        f"# {_md_text(report.model)} on {_md_text(report.device_name)}",
        "",
        f"{report.dtype}, batch {report.batch} x {report.seq}: **{report.latency_ms:.2f} ms** per inference "
        "unprofiled.",
        "",
        *[f"- {_md_text(line)}" for line in timing_lines(report)],
        "",
        f"| operator | input shapes | calls | {time_kind} | share | TFLOP/s | GB/s | class | kernels |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for op in report.operators[:top]:
        kernels = ", ".join(_md_code(k[:60], cell=True) for k in op.kernels[:2])
        lines.append(
            f"| {_md_code(op.name, cell=True)} | {_shapes(op)} | {op.calls} | {op.self_ms:.3f} | {op.share:.1%} | "
            f"{op.tflops_per_s:.1f} | {op.gb_per_s:.0f} | {op.bound} | {kernels} |"
        )
    hints = [_md_text(hint) for hint in report.hints] + [
        f"{_md_code(op.name)} {_shapes(op)}: {_md_text(op.hint)}" for op in report.operators[:top] if op.hint
    ]
    lines += ["", "## Hints", "", *[f"- {hint}" for hint in hints]]
    if report.compile_ab:
        ab = report.compile_ab
        lines += ["", "## torch.compile", "", f"eager {ab['eager_ms']:.2f} ms, compiled {ab['compiled_ms']:.2f} ms "
                  f"({ab['speedup']:.2f}x) after {ab['compile_s']:.1f} s of compiling"]  # fmt: skip
    if report.tuning:
        lines += ["", "## Tuned on the farm", "", "| operator | problem | kernel | status | baseline ms | tuned ms |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for entry in report.tuning:
            tuned = entry.get("tuned_ms")
            lines.append(
                f"| {_md_code(str(entry['operator']), cell=True)} | {_md_text(entry['problem'], cell=True)} | "
                f"{_md_text(entry['kernel'] or '-', cell=True)} | {_md_text(entry['status'], cell=True)} | "
                f"{entry.get('baseline_ms', 0):.3f} | {'-' if tuned is None else f'{tuned:.3f}'} |"
            )
        fused = [e for e in report.tuning if e.get("modules")]
        lines += [""] * bool(fused) + [
            f"- {_md_code(str(e['operator']))} ({len(e['modules'])} MLPs, {e.get('calls')} calls): "
            f"baseline {_md_text(e.get('baseline_how'))}"
            for e in fused
        ]
    if report.swap:
        swap = report.swap
        lines += ["", "## Swapped in", "", f"end to end {swap['baseline_ms']:.2f} → {swap['swapped_ms']:.2f} ms "
                  f"({swap['speedup']:.2f}x), max abs error {swap['max_abs_error']:.3g} "
                  f"({'match' if swap['outputs_match'] else 'MISMATCH'})"]  # fmt: skip
        if (check := output_check_line(swap)) is not None:
            lines += ["", f"Outputs {check}."]
    write_text(path, "\n".join(lines) + "\n")


def write_json(report: ProfileReport, path: Path) -> None:
    write_text(path, json.dumps(report.to_json(), indent=1))


def write_html(report: ProfileReport, path: Path, top: int = TOP) -> None:
    ops = report.operators[:top]
    width, bar_height = 720, 18
    longest = max((op.share for op in ops), default=1.0) or 1.0
    colours = {"compute": "#4878d0", "memory": "#ee854a", "launch": "#d65f5f"}
    bars = []
    for i, op in enumerate(ops):
        y = i * (bar_height + 4)
        w = 380 * op.share / longest
        label = html.escape(
            one_line(f"{op.name} {_shapes(op)}")[:60]
        )  # cut, then escaped: "&amp;" is never cut to "&am"
        bars.append(
            f'<text x="0" y="{y + 13}" font-size="11">{label}</text>'
            f'<rect x="330" y="{y}" width="{w:.1f}" height="{bar_height}" fill="{colours.get(op.bound, "#888")}"/>'
            f'<text x="{335 + w:.1f}" y="{y + 13}" font-size="11">{op.share:.1%} {op.bound}</text>'
        )
    svg = f'<svg width="{width}" height="{len(ops) * (bar_height + 4)}">{"".join(bars)}</svg>'
    rows = "".join(
        f"<tr><td>{html.escape(one_line(op.name))}</td><td>{html.escape(_shapes(op))}</td><td>{op.calls}</td>"
        f"<td>{op.self_ms:.3f}</td><td>{op.share:.1%}</td><td>{op.tflops_per_s:.1f}</td><td>{op.gb_per_s:.0f}</td>"
        f"<td>{op.bound}</td><td>{html.escape(one_line(op.hint or ''))}</td></tr>"
        for op in report.operators
    )
    hints = "".join(f"<li>{html.escape(one_line(h))}</li>" for h in report.hints)
    write_text(
        path,
        "<!doctype html><meta charset='utf-8'><title>kernelfarm profile</title>"
        "<style>body{font-family:sans-serif}td,th{padding:2px 8px;border-bottom:1px solid #ddd}</style>"
        f"<h1>{html.escape(one_line(report.model))} on {html.escape(one_line(report.device_name))}</h1>"
        f"<p>{report.dtype}, batch {report.batch} x {report.seq}: {report.latency_ms:.2f} ms per inference</p>"
        + "".join(f"<p>{html.escape(line)}</p>" for line in timing_lines(report))
        + f"<h2>Where the time goes</h2>{svg}<h2>Hints</h2><ul>{hints}</ul>"
        "<h2>Operators</h2><table><tr><th>operator</th><th>shapes</th><th>calls</th><th>ms</th><th>share</th>"
        f"<th>TFLOP/s</th><th>GB/s</th><th>class</th><th>hint</th></tr>{rows}</table>",
    )
