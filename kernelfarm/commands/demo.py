"""``kernelfarm demo``: start the embedded stack if needed, run a real tuning job end to end,
print the result, check it against the job's own trials, and stop what it started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from kernelfarm.client import Client
from kernelfarm.commands.jobs import call, follow_job, report
from kernelfarm.commands.stack_cmds import plan_workers
from kernelfarm.context import cli_context
from kernelfarm.stack import running_state, start_stack, stop_stack

console = Console(emoji=False)
DEMO_KERNEL = "convolution_kernel"  # shipped recording: Kernel Tuner's convolution on an RTX 3090
DEMO_GPU = "nvidia-geforce-rtx-3090"


def demo(
    trials: int = typer.Option(60, min=1, help="trial budget"),
    workers: int = typer.Option(2, min=1),
    parallelism: int = typer.Option(4, min=1),
    keep: bool = typer.Option(False, help="leave the stack running afterwards"),
    state_dir: Path = typer.Option(None),
) -> None:
    """A real tuning job on the embedded stack: replayed measurements of the shipped recording
    (no GPU needed), through the real API, coordinator, broker, workers and database."""
    ctx = cli_context(state_dir)
    started = False
    if running_state(ctx.state_dir) is None:
        with console.status("starting the embedded stack (PostgreSQL, Redis, API, coordinator, workers)…"):
            start_stack(ctx.settings, ctx.state_dir, plan_workers(workers, "replay", [], 0.0, 0.0))
        started = True
    try:
        client = ctx.client()
        console.print(f"[yellow]replay backend[/]: measurements are replayed from a recorded landscape ({DEMO_GPU})")
        job = call(client.submit, {"kernel": DEMO_KERNEL, "gpu_model": DEMO_GPU, "budget_trials": trials,
                                   "parallelism": parallelism, "seed": 7})  # fmt: skip
        console.print(f"job [bold]{job['id']}[/] submitted")
        final = follow_job(client, job["id"])
        report(client, final, 10)
        _check(client, final)
    finally:
        if started and not keep:
            console.print(f"stopped: {', '.join(stop_stack(ctx.state_dir))}")


def _check(client: Client, job: dict[str, Any]) -> None:
    """The printed best must be the fastest completed trial of the job: say so, or fail."""
    times = [t["time_ms"] for t in client.all_trials(job["id"]) if t["state"] == "complete"]
    if job["state"] != "complete" or not times or job["best"] is None:
        console.print(f"[red]job did not complete with a result: {escape(job['status_message'])}[/]")
        raise typer.Exit(1)
    if job["best"]["time_ms"] != min(times):
        console.print(f"[red]best {job['best']['time_ms']} != fastest completed trial {min(times)}[/]")
        raise typer.Exit(1)
    console.print(f"[green]check[/]: best {job['best']['time_ms']:.4f} ms equals the fastest of "
                  f"{len(times)} completed trials")  # fmt: skip
