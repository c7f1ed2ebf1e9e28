"""The user's main job: submit, follow with a progress bar, print the best config and top trials;
query best configs; list jobs, workers and kernels."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kernelfarm.client import ApiError, Client
from kernelfarm.context import cli_context

console = Console()
FINISHED = {"complete", "failed", "cancelled"}


def parse_pairs(pairs: list[str], what: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"{what} entries look like name=value, got {pair!r}")
        out[name] = _scalar(value)
    return out


def _scalar(text: str) -> int | float | str:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """API errors become one red line and exit code 1, never a traceback."""
    try:
        return fn(*args, **kwargs)
    except ApiError as exc:
        console.print(f"[red]error[/]: {exc.detail if exc.status else exc}")
        raise typer.Exit(1) from None


def tune(
    kernel: str = typer.Argument(..., help="kernel name (see `kernelfarm kernels`)"),
    gpu: str = typer.Option(..., help="GPU model slug or device name"),
    problem: list[str] = typer.Option([], help="problem value name=value (repeatable)"),
    budget: int = typer.Option(None, help="number of trials"),
    budget_seconds: float = typer.Option(None, help="wall-time budget, seconds"),
    parallelism: int = typer.Option(4, help="trials in flight at once"),
    strategy: str = typer.Option(None, help="search strategy (default: the farm's)"),
    seed: int = typer.Option(None),
    profile: str = typer.Option("all", help="ncu profile: all, top_k or none"),
    warm_start: bool = typer.Option(
        True, "--warm-start/--cold-start", help="learn from this kernel and problem's trials on other GPU models"
    ),
    set_values: list[str] = typer.Option([], "--set", help="restrict a parameter: name=v1,v2,..."),
    constraint: list[str] = typer.Option([], help="extra constraint expression (repeatable)"),
    follow: bool = typer.Option(True, help="follow with a progress bar and print the result"),
    top: int = typer.Option(10, help="rows in the top-trials table"),
) -> None:
    """Submit a tuning job, follow it, then print the best config and the top trials."""
    client = cli_context().client()
    body: dict[str, Any] = {
        "kernel": kernel, "gpu_model": gpu, "problem": parse_pairs(problem, "--problem"),
        "parallelism": parallelism, "profile": profile, "warm_start": warm_start,
    }  # fmt: skip
    for key, value in (("budget_trials", budget), ("budget_seconds", budget_seconds), ("strategy", strategy),
                       ("seed", seed)):  # fmt: skip
        if value is not None:
            body[key] = value
    if set_values or constraint:
        restricted = {k: [_scalar(v) for v in str(vs).split(",")] for k, vs in parse_pairs(set_values, "--set").items()}
        body["space"] = {"parameters": restricted, "constraints": constraint}
    job = call(client.submit, body)
    console.print(f"job [bold]{job['id']}[/] submitted: {job['kernel']} {job['problem']} on {job['gpu_model']}")
    if follow:
        report(client, follow_job(client, job["id"]), top)


def follow_job(client: Client, job_id: str, poll: float = 0.5) -> dict[str, Any]:
    job = call(client.job, job_id)
    total = job["budget_trials"]
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[best]}"), console=console, transient=False) as bar:  # fmt: skip
        task = bar.add_task("tuning", total=total, best="")
        while True:
            done = job["progress"]["complete"] + job["progress"]["failed"]
            best = f"best {job['best']['time_ms']:.4f} ms" if job["best"] else job["status_message"][:60]
            bar.update(task, completed=done, total=total or max(done, 1), best=best)
            if job["state"] in FINISHED:
                break
            time.sleep(poll)
            job = call(client.job, job_id)
    return job


def report(client: Client, job: dict[str, Any], top: int) -> None:
    console.print(f"job {job['id']}: [bold]{job['state']}[/] — {job['status_message']}")
    progress = job["progress"]
    console.print(f"trials: {progress['complete']} complete, {progress['failed']} failed, {progress['total']} total")
    if job["best"]:
        console.print(f"[green]best config[/] ({job['best']['time_ms']:.4f} ms): {json.dumps(job['best']['config'])}")
    page = call(client.trials, job["id"], order="time", state="complete", limit=top)
    table = Table("rank", "trial", "time ms (median)", "p20", "p80", "config", title=f"top {top} trials")
    for rank, trial in enumerate(page["items"], 1):
        table.add_row(str(rank), str(trial["id"]), f"{trial['time_ms']:.4f}", f"{trial['time_p20_ms']:.4f}",
                      f"{trial['time_p80_ms']:.4f}", trial["config_key"])  # fmt: skip
    console.print(table)


def best(
    kernel: str = typer.Argument(...),
    gpu: str = typer.Option(..., help="GPU model slug or device name"),
    problem: list[str] = typer.Option([], help="name=value (repeatable)"),
    as_json: bool = typer.Option(False, "--json", help="print the raw JSON"),
) -> None:
    """The best known config for a kernel, problem and GPU model (with the fallback used)."""
    client = cli_context().client()
    result = call(client.best, kernel, gpu, parse_pairs(problem, "--problem"))
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    console.print(f"[green]{result['match']}[/] match: {result['matched_gpu_model']} {result['matched_problem']}")
    console.print(f"{result['time_ms']:.4f} ms  config {json.dumps(result['config'])}")
    console.print(f"from trial {result['trial_id']} of job {result['job_id']}; backend "
                  f"{result['provenance'].get('backend', '?')}")  # fmt: skip


def jobs(state: str = typer.Option(None), kernel: str = typer.Option(None), limit: int = 20, offset: int = 0) -> None:
    """List jobs, newest first."""
    page = call(cli_context().client().jobs, state=state, kernel=kernel, limit=limit, offset=offset)
    table = Table("id", "kernel", "gpu model", "state", "trials", "best ms", "message",
                  title=f"jobs {offset + 1}-{offset + len(page['items'])} of {page['total']}")  # fmt: skip
    for job in page["items"]:
        table.add_row(job["id"], job["kernel"], job["gpu_model"], job["state"], str(job["progress"]["total"]),
                      f"{job['best']['time_ms']:.4f}" if job["best"] else "", job["status_message"][:50])  # fmt: skip
    console.print(table)


def show(job_id: str, top: int = 10) -> None:
    """Show one job and its top trials."""
    client = cli_context().client()
    report(client, call(client.job, job_id), top)


def cancel(job_id: str) -> None:
    """Cancel a job (idempotent)."""
    job = call(cli_context().client().cancel, job_id)
    console.print(f"job {job['id']}: {job['state']}")


def workers(include_all: bool = typer.Option(False, "--all", help="include stopped workers")) -> None:
    """Online workers and their GPU models."""
    rows = call(cli_context().client().workers, include_all)
    table = Table("name", "backend", "gpu model", "gpu", "cc", "driver", "last heartbeat", "live")
    for w in rows:
        table.add_row(w["name"], w["backend"], w["gpu_model"], w["gpu_name"], w["compute_capability"] or "",
                      w["driver_version"] or "", w["last_heartbeat"], "yes" if w["live"] else "no")  # fmt: skip
    console.print(table)


def kernels() -> None:
    """Kernels and their search spaces."""
    rows = call(cli_context().client().kernels)
    table = Table("kernel", "backends", "parameters", "valid configs", "recorded on")
    for k in rows:
        table.add_row(k["name"], ",".join(k["backends"]), ", ".join(k["parameters"]),
                      str(k["valid_configs_default_problem"]), ",".join(k["recorded_gpu_models"]))  # fmt: skip
    console.print(table)


def save_json(path: Path | None, data: Any) -> None:
    if path:
        path.write_text(json.dumps(data, indent=2, default=str))
