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
import stat
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from kernelfarm.commands.jobs import fail
from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.files import write_text_atomically
from kernelfarm.core.printable import one_line, quoted
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
        if not _is_file(path):
            raise typer.BadParameter(f"{path} is not a file", param_hint="LANDSCAPE")
    if json_path is not None:
        _check_destination(json_path)
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
        _write_report(json_path, json.dumps(report, indent=2) + "\n")
        console.print(f"wrote {json_path}", markup=False, highlight=False)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long: Path.is_file lets that through
        return False


def _check_destination(path: Path) -> None:
    """Refuse, before the benchmark runs (minutes), a --json destination that cannot take the report: a
    folder, or a file where a folder of its path should be, raised a traceback after the run, and its
    report was lost. Missing folders are made when the report is written."""
    try:
        if path.is_dir():
            raise typer.BadParameter(f"{path} is a folder: --json names the file to write", param_hint="--json")
        folder = path.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not folder.is_dir():
            raise typer.BadParameter(f"cannot write {path}: {folder} is a file, not a folder", param_hint="--json")
    except OSError as exc:  # a name too long, a folder that cannot be searched
        raise typer.BadParameter(one_line(f"cannot write {path}: {exc.strerror or exc}"), param_hint="--json") from None


def _write_report(path: Path, text: str) -> None:
    """``text`` into ``path``: atomically (core/files.py), so that a full disk leaves the previous report
    or none, never half a one; a path that is not a regular file (/dev/stdout, a FIFO) is written in place,
    as it cannot be replaced. A failure is one line and exit 1 (the tables above were printed)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and not stat.S_ISREG(path.stat().st_mode):
            with path.open("w", encoding="utf-8") as handle:
                handle.write(text)
        else:
            write_text_atomically(path, text)
    except OSError as exc:  # /dev/full, a folder made there since the check, no permission
        fail(one_line(f"cannot write {path}: {exc.strerror or exc}"))


def _parse_options(items: list[str], strategies: list[str]) -> dict[str, dict[str, Any]]:
    options: dict[str, dict[str, Any]] = {}
    for item in items:
        head, sep, text = item.partition("=")
        name, dot, key = head.partition(".")
        if not sep or not dot or name not in strategies:
            raise typer.BadParameter(
                f"{quoted(item)}: expected STRATEGY.KEY=VALUE for a chosen strategy", param_hint="--option"
            )
        options.setdefault(name, {})[key] = _option_value(item, text)
    return options


def _option_value(item: str, text: str) -> Any:
    """An option's VALUE read as JSON (5, 0.1, true, "ei"), a bare word as the text itself (ei). JSON
    that no strategy could take is a usage error: json.loads raises ValueError, not JSONDecodeError, for
    an integer of more digits than Python converts, and RecursionError for arrays nested thousands deep
    (each was a traceback)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
    except RecursionError:
        problem = "nested too deeply"
    except ValueError as exc:
        problem = str(exc).split(";")[0]  # "Exceeds the limit (4300 digits) ...: value has 5000 digits"
    raise typer.BadParameter(f"{quoted(item)}: {problem}", param_hint="--option")


if __name__ == "__main__":
    app()
