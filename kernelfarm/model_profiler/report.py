"""The report's outputs: a rich table for the terminal, JSON, and a self-contained HTML page.

The HTML page draws its bar chart as inline SVG: it loads nothing from anywhere (GPU nodes are
air-gapped) and opens from a file.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kernelfarm.model_profiler.analysis import OperatorReport, ProfileReport

TOP = 15


def _shapes(op: OperatorReport) -> str:
    return " ".join("x".join(map(str, shape)) for shape in op.input_shapes if shape) or "-"


def print_table(report: ProfileReport, console: Console, top: int = TOP) -> None:
    time_kind = "self CUDA" if report.device == "cuda" else "self CPU"
    console.print(
        f"[bold]{report.model}[/] {report.dtype} batch {report.batch} x {report.seq} on {report.device_name}: "
        f"{report.latency_ms:.2f} ms per inference (profiled {report.profiled_ms:.2f} ms, "
        f"overhead {report.profiling_overhead:+.1%}; the table accounts for {report.accounted_ms:.2f} ms)"
    )
    table = Table(show_lines=False)
    for column in ("operator", "input shapes", "calls", f"{time_kind} ms", "share", "TFLOP/s", "GB/s", "class",
                   "kernels"):  # fmt: skip
        table.add_column(column, overflow="fold")
    for op in report.operators[:top]:
        table.add_row(
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
    console.print(table)
    for line in report.hints + [f"{op.name}: {op.hint}" for op in report.operators[:top] if op.hint]:
        console.print(f"hint: {line}")
    if report.compile_ab:
        ab = report.compile_ab
        console.print(
            f"torch.compile: eager {ab['eager_ms']:.2f} ms, compiled {ab['compiled_ms']:.2f} ms "
            f"({ab['speedup']:.2f}x) after {ab['compile_s']:.1f} s of compiling"
        )
    for entry in report.tuning or []:
        console.print(
            f"tuned {entry['operator']} {entry['problem']} with {entry['kernel']}: "
            f"{entry.get('baseline_ms', 0):.3f} → {entry.get('tuned_ms') or float('nan'):.3f} ms ({entry['status']})"
        )
    if report.swap:
        console.print(
            f"swapped in: end to end {report.swap['baseline_ms']:.2f} → {report.swap['swapped_ms']:.2f} ms "
            f"({report.swap['speedup']:.2f}x), max error {report.swap['max_abs_error']:.3g} "
            f"({'match' if report.swap['outputs_match'] else 'MISMATCH'})"
        )


def write_json(report: ProfileReport, path: Path) -> None:
    path.write_text(json.dumps(report.to_json(), indent=1))


def write_html(report: ProfileReport, path: Path, top: int = TOP) -> None:
    ops = report.operators[:top]
    width, bar_height = 720, 18
    longest = max((op.share for op in ops), default=1.0) or 1.0
    colours = {"compute": "#4878d0", "memory": "#ee854a", "launch": "#d65f5f"}
    bars = []
    for i, op in enumerate(ops):
        y = i * (bar_height + 4)
        w = 380 * op.share / longest
        label = html.escape(f"{op.name} {_shapes(op)}")[:60]
        bars.append(
            f'<text x="0" y="{y + 13}" font-size="11">{label}</text>'
            f'<rect x="330" y="{y}" width="{w:.1f}" height="{bar_height}" fill="{colours.get(op.bound, "#888")}"/>'
            f'<text x="{335 + w:.1f}" y="{y + 13}" font-size="11">{op.share:.1%} {op.bound}</text>'
        )
    svg = f'<svg width="{width}" height="{len(ops) * (bar_height + 4)}">{"".join(bars)}</svg>'
    rows = "".join(
        f"<tr><td>{html.escape(op.name)}</td><td>{html.escape(_shapes(op))}</td><td>{op.calls}</td>"
        f"<td>{op.self_ms:.3f}</td><td>{op.share:.1%}</td><td>{op.tflops_per_s:.1f}</td><td>{op.gb_per_s:.0f}</td>"
        f"<td>{op.bound}</td><td>{html.escape(op.hint or '')}</td></tr>"
        for op in report.operators
    )
    hints = "".join(f"<li>{html.escape(h)}</li>" for h in report.hints)
    path.write_text(
        "<!doctype html><meta charset='utf-8'><title>kernelfarm profile</title>"
        "<style>body{font-family:sans-serif}td,th{padding:2px 8px;border-bottom:1px solid #ddd}</style>"
        f"<h1>{html.escape(report.model)} on {html.escape(report.device_name)}</h1>"
        f"<p>{report.dtype}, batch {report.batch} x {report.seq}: {report.latency_ms:.2f} ms per inference</p>"
        f"<h2>Where the time goes</h2>{svg}<h2>Hints</h2><ul>{hints}</ul>"
        "<h2>Operators</h2><table><tr><th>operator</th><th>shapes</th><th>calls</th><th>ms</th><th>share</th>"
        f"<th>TFLOP/s</th><th>GB/s</th><th>class</th><th>hint</th></tr>{rows}</table>"
    )
