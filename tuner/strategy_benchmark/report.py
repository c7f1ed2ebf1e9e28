"""The benchmark report for people: one rich table per landscape (the JSON is for machines).

JSON layout (``run_benchmark``'s return value)::

    {"settings": {budget, repeats, keep_failures, seed, batch, options},
     "landscapes": {NAME: {kernel, device, configs, failed_configs, optimum_ms,
                           "strategies": {STRATEGY: {frac_at: {"25", "50", "100", "200"},
                                                     n90_median, n95_median, n90_success,
                                                     n95_success, failed_fraction,
                                                     ask_ms_median, repeats, budget}}}}}
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from kernelfarm.tuner.strategy_benchmark.metrics import CHECKPOINTS


def tables(report: dict[str, Any]) -> list[Table]:
    settings = report["settings"]
    mode = "failed configs kept (each costs an evaluation)" if settings["keep_failures"] else "failed configs removed"
    out = []
    for name, entry in report["landscapes"].items():
        table = Table(
            title=(
                f"{name} ({entry['configs']} configs, {entry['failed_configs']} fail; {mode}; "
                f"budget {settings['budget']}, {settings['repeats']} repeats, batch {settings['batch']})"
            ),
            title_justify="left",
        )
        table.add_column("strategy")
        for b in CHECKPOINTS:
            table.add_column(f"frac@{b}", justify="right")
        table.add_column("n90 (succ)", justify="right")
        table.add_column("n95 (succ)", justify="right")
        table.add_column("failed evals", justify="right")
        table.add_column("ask ms", justify="right")
        for strategy, s in entry["strategies"].items():
            table.add_row(
                strategy,
                *(_fraction(s["frac_at"].get(str(b))) for b in CHECKPOINTS),
                _hits(s["n90_median"], s["n90_success"], s["budget"]),
                _hits(s["n95_median"], s["n95_success"], s["budget"]),
                f"{100 * s['failed_fraction']:.0f}%",
                "-" if s["ask_ms_median"] is None else f"{s['ask_ms_median']:.1f}",
            )
        out.append(table)
    return out


def _fraction(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _hits(median: float | None, success: float, budget: int) -> str:
    text = f">{budget}" if median is None else f"{median:g}"
    return f"{text} ({100 * success:.0f}%)"
