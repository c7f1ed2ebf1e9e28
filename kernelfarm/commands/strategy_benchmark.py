# Mounted in kernelfarm/cli.py as `kernelfarm bench-strategies` (the function itself is the command,
# so `kernelfarm bench-strategies LANDSCAPE... --strategy NAME ...` needs no sub-command name).
# ``app`` below is the same command as a stand-alone typer app:
# `python -m kernelfarm.commands.strategy_benchmark LANDSCAPE...`.
"""``kernelfarm bench-strategies``: replay recorded landscapes through search strategies.

Reports, per landscape and strategy, the mean fraction of the optimum (t_opt / t_best) after
25/50/100/200 evaluations, the median evaluations to reach 0.90 and 0.95 of it with the share of
runs that did, the share of evaluations spent on failing configs, and the optimizer's median
wall time per ask. A table for people, ``--json`` for machines (layout: tuner/strategy_benchmark/report.py).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.strategy_names import DEFAULT_STRATEGY

log = logging.getLogger(__name__)
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command()
def benchmark_strategies(
    landscapes: Annotated[list[Path], typer.Argument(help="Kernel Tuner cache files (.json or .json.gz).")],
    strategy: Annotated[
        list[str] | None, typer.Option("--strategy", "-s", help="Strategy to run (repeatable).")
    ] = None,
    budget: Annotated[int, typer.Option(min=1, help="Evaluations per run.")] = 200,
    repeats: Annotated[int, typer.Option(min=1, help="Runs per strategy and landscape.")] = 10,
    keep_failures: Annotated[
        bool, typer.Option("--keep-failures", help="Leave failed configs in the space; each costs an evaluation.")
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed of the first repeat (repeat r uses seed + r).")] = 0,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the report as JSON here.")] = None,
    batch: Annotated[int, typer.Option(min=1, help="Configs asked per step (k free workers).")] = 1,
    jobs: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
    option: Annotated[
        list[str] | None,
        typer.Option("--option", "-o", help="Strategy option STRATEGY.KEY=VALUE (JSON value), repeatable."),
    ] = None,
) -> None:
    """Replay landscapes through search strategies and score them."""
    # Imported here: the strategies pull in scikit-optimize and SciPy (~1.3 s), which every other
    # command, `kernelfarm worker` above all (its start-up is a replacement worker's downtime), does not need.
    from kernelfarm.tuner.strategy_benchmark.report import tables
    from kernelfarm.tuner.strategy_benchmark.runner import BenchmarkSettings, run_benchmark

    for path in landscapes:
        if not path.is_file():
            raise typer.BadParameter(f"{path} is not a file", param_hint="LANDSCAPE")
    strategies = list(dict.fromkeys(strategy or [DEFAULT_STRATEGY]))
    settings = BenchmarkSettings(
        budget=budget,
        repeats=repeats,
        keep_failures=keep_failures,
        seed=seed,
        batch=batch,
        jobs=jobs,
        options=_parse_options(option or [], strategies),
    )
    console = Console(emoji=False)
    try:
        with console.status("replaying…"):
            report = run_benchmark(landscapes, strategies, settings, progress=log.info)
    except InvalidInput as exc:
        raise typer.BadParameter(str(exc)) from None
    for table in tables(report):
        console.print(table)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2) + "\n")
        console.print(f"wrote {json_path}")


def _parse_options(items: list[str], strategies: list[str]) -> dict[str, dict[str, Any]]:
    options: dict[str, dict[str, Any]] = {}
    for item in items:
        head, sep, text = item.partition("=")
        name, dot, key = head.partition(".")
        if not sep or not dot or name not in strategies:
            raise typer.BadParameter(
                f"{item!r}: expected STRATEGY.KEY=VALUE for a chosen strategy", param_hint="--option"
            )
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        options.setdefault(name, {})[key] = value
    return options


if __name__ == "__main__":
    app()
