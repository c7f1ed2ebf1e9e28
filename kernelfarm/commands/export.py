"""``kernelfarm export``: a kernel's best configs, or a job's trials, in the formats users' code reads
(docs/EXPORTS.md)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from kernelfarm.client import ApiError
from kernelfarm.commands.jobs import parse_pairs
from kernelfarm.context import cli_context
from kernelfarm.core.exports import BEST_FORMATS, TRIAL_FORMATS, json_format

console = Console(stderr=True)


def export(
    kernel: str = typer.Argument(..., help="kernel name"),
    format: str = typer.Option("json", "--format", "-f", help="json, header, triton, kernel_tuner, t4 or csv"),
    gpu: list[str] = typer.Option([], help="only this GPU model (slug or device name; repeatable)"),
    problem: list[str] = typer.Option([], help="only problems with this name=value (repeatable)"),
    job: str = typer.Option(None, help="the job whose trials kernel_tuner, t4 and csv export"),
    out: Path = typer.Option(None, "--out", "-o", help="file to write (triton: folder); default: standard output"),
) -> None:
    """Export best configs (json, header, triton: every GPU model and problem recorded, or those
    filtered) or a job's trials (kernel_tuner, t4, csv: --job)."""
    if format not in BEST_FORMATS + TRIAL_FORMATS:
        raise typer.BadParameter(
            f"format must be one of {', '.join(BEST_FORMATS + TRIAL_FORMATS)}", param_hint="--format"
        )
    if format in TRIAL_FORMATS and not job:
        raise typer.BadParameter(f"the {format} format exports a job's trials: give --job", param_hint="--job")
    client = cli_context().sdk_client()
    try:
        if format in TRIAL_FORMATS:
            written: str | dict[str, str] = client.export_trials(job, format)  # type: ignore[arg-type]
        elif format == "json":
            written = json_format.write(
                client.export(kernel, "json", gpu=gpu, problem=parse_pairs(problem, "--problem"))
            )
        else:
            written = client.export(kernel, format, gpu=gpu, problem=parse_pairs(problem, "--problem"))  # type: ignore[call-overload]
    except ApiError as exc:
        console.print(f"[red]error[/]: {exc.detail if exc.status else exc}")
        raise typer.Exit(1) from None
    if isinstance(written, dict):  # triton: a file per device
        folder = out or Path(".")
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in written.items():
            (folder / name).write_text(text)
            console.print(f"wrote {folder / name}")
    elif out is not None:
        out.write_text(written)
        console.print(f"wrote {out}")
    else:
        typer.echo(written, nl=False)
