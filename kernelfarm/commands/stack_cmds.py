"""``kernelfarm up`` / ``down`` / ``status``: the embedded single-host stack."""

from __future__ import annotations

import json
import math
import signal
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from kernelfarm.commands.serve import default_landscapes, gpu_backend_available
from kernelfarm.context import cli_context
from kernelfarm.stack import (
    StackState,
    Supervisor,
    WorkerPlan,
    owned_groups,
    read_health,
    running_state,
    start_stack,
    stop_stack_checked,
    survivors,
)

console = Console(emoji=False)
# Each worker is a Python process of its own (~150 MB, a CPU-second to start): `up --workers 1000000`
# forked hundreds before the machine stalled, and `down` then needed minutes.
MAX_WORKERS = 64


def plan_workers(workers: int, backend: str, landscape: list[Path], sleep_ms: float, time_scale: float) -> WorkerPlan:
    from kernelfarm.worker.backend_factory import BACKEND_NAMES

    if workers > MAX_WORKERS:
        raise typer.BadParameter(f"{workers} is more than {MAX_WORKERS} worker processes on one host",
                                 param_hint="--workers")  # fmt: skip
    for value, option in ((sleep_ms, "--sleep-ms"), (time_scale, "--time-scale")):
        if not (math.isfinite(value) and value >= 0):
            raise typer.BadParameter(f"{value} is not a finite number >= 0", param_hint=option)
    chosen = gpu_backend_available() if backend == "auto" else backend
    if chosen not in BACKEND_NAMES:  # say so now, not after the workers died and `up` timed out
        raise typer.BadParameter(f"backend must be one of {', '.join(BACKEND_NAMES)} or auto")
    paths = tuple(p.resolve() for p in landscape) or tuple(default_landscapes())
    return WorkerPlan(chosen, workers, paths if chosen == "replay" else (), sleep_ms, time_scale)


def up(
    workers: int = typer.Option(2, min=0, help=f"worker processes (cuda: one per GPU; at most {MAX_WORKERS})"),
    backend: str = typer.Option("auto", help="cuda, triton, replay, fake (CPU stand-in), or auto"),
    landscape: list[Path] = typer.Option([], help="replay: recordings to serve (default: shipped ones)"),
    sleep_ms: float = typer.Option(0.0, help="replay: fixed time per trial, ms"),
    time_scale: float = typer.Option(0.0, help="replay: also sleep recorded time x this factor"),
    detach: bool = typer.Option(False, help="return once everything answers; stop later with `kernelfarm down`"),
    state_dir: Path = typer.Option(
        None, help="where data, logs, pids and secrets live (default: KERNELFARM_STATE_DIR, else a per-user folder)"
    ),
    api_port: int = typer.Option(0, min=0, max=65535, help="API port (0: 8765 when it is free, else a free one)"),
    spares: bool | None = typer.Option(
        None,
        "--spares/--no-spares",
        help="keep a warm spare of the coordinator and of each worker, promoted when it dies "
        "(default: on for replay and fake workers; a GPU worker's spare would hold its own compile pool)",
        show_default=False,
    ),
) -> None:
    """Start PostgreSQL and Redis (embedded, unless DATABASE_URL / REDIS_URL are set), apply
    migrations, then the API, the coordinator and the workers."""
    ctx = cli_context(state_dir)
    plan = plan_workers(workers, backend, landscape, sleep_ms, time_scale)
    # SIGTERM while starting (a CI job's timeout, `timeout 60 kernelfarm up`) interrupts like Ctrl-C, so
    # start_stack stops what it had started instead of leaving it running unrecorded.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with console.status("starting the stack…"):
            state = start_stack(ctx.settings, ctx.state_dir, plan, api_port or None)  # StackError: one line (cli.py)
    except KeyboardInterrupt:
        console.print("interrupted while starting; stopped what had started", markup=False)
        raise typer.Exit(130) from None
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _describe(state, plan)
    if detach:
        return
    console.print("running; Ctrl-C stops everything; a component that exits on its own is restarted (with backoff)")
    keep_spares = spares if spares is not None else plan.backend in ("replay", "fake")
    supervisor = Supervisor(state, ctx.state_dir, spares=keep_spares)
    stopping = False
    announced: dict[str, str] = {}

    def _stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    try:
        while not stopping:
            supervisor.wait(0.5)  # wakes at once when a component dies
            if supervisor.stopping():  # `kernelfarm down`, from another shell, stops the stack itself
                supervisor.close()
                console.print("stopped by `kernelfarm down`")
                return
            for name in supervisor.check():
                logs = escape(str(ctx.state_dir / "logs"))
                console.print(f"[yellow]{name} exited on its own; restarted[/] (log: {logs})")
            for name, health in supervisor.health().items():
                if health.state in ("crash-looping", "gave up") and announced.get(name) != health.state:
                    console.print(f"[bold red]{name} is {health.state.upper()}[/]: {health.exits} exits in "
                                  f"{supervisor.window_s:.0f} s; see {escape(str(health.log))}")  # fmt: skip
                announced[name] = health.state
    except KeyboardInterrupt:
        pass
    supervisor.close()
    _report_stop(ctx.state_dir)


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def _describe(state: StackState, plan: WorkerPlan) -> None:
    urls = f"API {state.api_url}  database {state.database_url}  broker {state.redis_url}"  # a password may hold "["
    console.print(f"[green]up[/]: {escape(urls)}")
    console.print(f"dashboard {state.api_url}/ui/  (log in with the admin token {state.token})", markup=False)
    what = {"replay": "replaying recorded measurements", "fake": "synthetic timings on the CPU (no GPU)"}.get(
        plan.backend, "measuring on the GPU"
    )
    console.print(f"{plan.count} {plan.backend} worker(s), {what}")


def down(state_dir: Path = typer.Option(None, help="the state directory used by `up`")) -> None:
    """Stop the embedded stack started by `kernelfarm up`, and check that every part of it is gone."""
    _report_stop(cli_context(state_dir).state_dir)


def _report_stop(state_dir: Path) -> None:
    report = stop_stack_checked(state_dir)
    if report.stopped:
        console.print(f"stopped: {', '.join(report.stopped)}", markup=False)
    if report.left:
        console.print(
            f"[red]still running[/]: {escape('; '.join(report.left))} (run `kernelfarm down` again, or stop it by pid)"
        )
        raise typer.Exit(1)
    if not report.stopped:
        console.print(f"nothing was running (state dir {state_dir.resolve()})", markup=False)


def status(state_dir: Path = typer.Option(None),
           as_json: bool = typer.Option(False, "--json", help="print JSON (for scripts)")) -> None:  # fmt: skip
    """Is the embedded stack running, and where? Exit 1 when it is not, or a component is down."""
    ctx = cli_context(state_dir)
    state = running_state(ctx.state_dir)
    if as_json:
        _status_json(ctx.state_dir, state)
        return
    if state is None:
        left = survivors(ctx.state_dir)
        extra = f"; left over from an earlier stack: {', '.join(left)} (`kernelfarm down` stops them)" if left else ""
        console.print(f"not running (state dir {ctx.state_dir.resolve()}): run `kernelfarm up`{extra}", markup=False)
        raise typer.Exit(1)
    console.print(f"API {state.api_url}; state dir {ctx.state_dir.resolve()}", markup=False)
    health = read_health(ctx.state_dir)
    owned = owned_groups(ctx.state_dir)  # a pid of stack.json reused by another process is not the stack's
    failing = False
    for process in state.processes:
        known = health.get(process.name)
        if known is None:  # a detached stack has no supervisor: what runs is what there is
            described = (
                "running"
                if process.pid in owned
                else "[red]exited[/] (no supervisor: `kernelfarm up` in the foreground restarts)"
            )
        elif known.state in ("crash-looping", "gave up"):
            described = f"[bold red]{known.state.upper()}[/] ({known.exits} exits; log {escape(str(known.log))})"
        else:
            described = known.state + (f" in {known.restart_in_s:.0f} s" if known.state == "restarting" else "")
        failing = failing or "exited" in described or "CRASH" in described or "GAVE" in described
        console.print(f"  {process.name} (pid {process.pid}): {described}")
    if failing:
        raise typer.Exit(1)


def _status_json(state_dir: Path, state: StackState | None) -> None:
    health = read_health(state_dir)
    owned = owned_groups(state_dir)
    components = []
    for process in state.processes if state else []:
        known = health.get(process.name)
        running = process.pid in owned
        components.append({"name": process.name, "pid": process.pid, "running": running, "log": process.log,
                           "state": known.state if known else ("running" if running else "exited"),
                           "exits": known.exits if known else None})  # fmt: skip
    failing = any(c["state"] not in ("running", "restarting") for c in components)
    typer.echo(json.dumps({"running": state is not None, "state_dir": str(state_dir.resolve()),
                           "api_url": state.api_url if state else None, "components": components,
                           "left_over": [] if state else survivors(state_dir)}, indent=2))  # fmt: skip
    if state is None or failing:
        raise typer.Exit(1)
