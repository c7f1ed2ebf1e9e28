"""``kernelfarm up`` / ``down`` / ``status``: the embedded single-host stack."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import typer
from rich.console import Console

from kernelfarm.commands.serve import default_landscapes, gpu_backend_available
from kernelfarm.context import cli_context
from kernelfarm.stack import StackState, Supervisor, WorkerPlan, running_state, start_stack, stop_stack

console = Console()


def plan_workers(workers: int, backend: str, landscape: list[Path], sleep_ms: float, time_scale: float) -> WorkerPlan:
    from kernelfarm.worker.backend_factory import BACKEND_NAMES

    chosen = gpu_backend_available() if backend == "auto" else backend
    if chosen not in BACKEND_NAMES:  # say so now, not after the workers died and `up` timed out
        raise typer.BadParameter(f"backend must be one of {', '.join(BACKEND_NAMES)} or auto")
    paths = tuple(p.resolve() for p in landscape) or tuple(default_landscapes())
    return WorkerPlan(chosen, workers, paths if chosen == "replay" else (), sleep_ms, time_scale)


def up(
    workers: int = typer.Option(2, min=0, help="worker processes (cuda: one per GPU)"),
    backend: str = typer.Option("auto", help="cuda, triton, replay, fake (CPU stand-in), or auto"),
    landscape: list[Path] = typer.Option([], help="replay: recordings to serve (default: shipped ones)"),
    sleep_ms: float = typer.Option(0.0, help="replay: fixed time per trial, ms"),
    time_scale: float = typer.Option(0.0, help="replay: also sleep recorded time x this factor"),
    detach: bool = typer.Option(False, help="return once everything answers; stop later with `kernelfarm down`"),
    state_dir: Path = typer.Option(None, help="where data, logs and pids live (default .kernelfarm)"),
    api_port: int = typer.Option(0, help="API port (0: a free one)"),
) -> None:
    """Start PostgreSQL and Redis (embedded, unless DATABASE_URL / REDIS_URL are set), apply
    migrations, then the API, the coordinator and the workers."""
    ctx = cli_context(state_dir)
    plan = plan_workers(workers, backend, landscape, sleep_ms, time_scale)
    with console.status("starting the stack…"):
        try:
            state = start_stack(ctx.settings, ctx.state_dir, plan, api_port or None)
        except RuntimeError as exc:
            console.print(f"[red]{exc}[/]")
            raise typer.Exit(1) from None
    _describe(state, plan)
    if detach:
        return
    console.print("running; Ctrl-C stops everything; a component that exits on its own is restarted")
    supervisor = Supervisor(state, ctx.state_dir)
    stopping = False

    def _stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    try:
        while not stopping:
            time.sleep(0.5)
            for name in supervisor.check():
                console.print(f"[yellow]{name} exited on its own; restarted[/] (log: {ctx.state_dir / 'logs'})")
    except KeyboardInterrupt:
        pass
    console.print(f"stopped: {', '.join(stop_stack(ctx.state_dir))}")


def _describe(state: StackState, plan: WorkerPlan) -> None:
    console.print(f"[green]up[/]: API {state.api_url}  database {state.database_url}  broker {state.redis_url}")
    what = {"replay": "replaying recorded measurements", "fake": "synthetic timings on the CPU (no GPU)"}.get(
        plan.backend, "measuring on the GPU"
    )
    console.print(f"{plan.count} {plan.backend} worker(s), {what}")


def down(state_dir: Path = typer.Option(None, help="the state directory used by `up`")) -> None:
    """Stop the embedded stack started by `kernelfarm up`."""
    stopped = stop_stack(cli_context(state_dir).state_dir)
    console.print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")


def status(state_dir: Path = typer.Option(None)) -> None:
    """Is the embedded stack running, and where?"""
    state = running_state(cli_context(state_dir).state_dir)
    if state is None:
        console.print("not running")
        raise typer.Exit(1)
    console.print(f"API {state.api_url}; processes: {', '.join(p.name for p in state.processes)}")
