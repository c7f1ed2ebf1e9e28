"""The user's main job: submit, follow with a progress bar, print the best config and top trials;
query best configs; list jobs, workers and kernels."""

from __future__ import annotations

import json
import math
import re
import reprlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kernelfarm.client import ApiError, Client
from kernelfarm.context import cli_context
from kernelfarm.core.printable import one_line, terminal_text

console = Console(emoji=False)
err_console = Console(stderr=True, emoji=False)  # errors: never mixed into what a command prints (`--json` above all)
FINISHED = {"complete", "failed", "cancelled"}
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
# Exit codes of `tune` / `job --wait`: a job that ended without a result, and giving up on a job that
# no live worker could run (documented in the README).
EXIT_NO_RESULT = 1
EXIT_NO_WORKER = 3
EXIT_INTERRUPTED = 130  # Ctrl-C while following: the shell's code for SIGINT (128 + 2), as before
# The API's bounds of a page (api/routes/jobs.py): a trials page (`--top`) and a jobs page (`jobs --limit`,
# `--offset`). Out of them the request was refused after a whole `tune`, naming the API's `limit`.
TRIALS_PAGE_MAX = 1000
JOBS_PAGE_MAX = 500
MAX_OFFSET = 10_000_000
MAX_NESTING = 32  # of an --option's JSON value: the farm's options are scalars; deeper is a mistake
JSON_OPTION = typer.Option(False, "--json", help="print JSON (for scripts) instead of a table")


class _Unreadable(ValueError):
    """A value no request could carry, and why (parse_pairs names the argument)."""


def _refuse_long_integer(text: str) -> None:
    """int() and json.loads refuse an integer of more digits than Python converts (a ValueError, as
    for a word): it became inf (float) or a string, which the server then refused for another reason."""
    most = sys.get_int_max_str_digits()
    digits = len(text.strip().lstrip("+-"))
    if most and digits > most and re.fullmatch(r"\s*[-+]?\d+\s*", text):
        raise _Unreadable(f"an integer of {digits} digits: at most {most}")


def _scalar(text: str) -> int | float | str:
    _refuse_long_integer(text)
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_pairs(pairs: list[str], what: str, read: Callable[[str], Any] = _scalar) -> dict[str, Any]:
    """``name=value`` entries; each value read by ``read`` (a number where it is one, else the text).

    Raises:
        typer.BadParameter: an entry without a name or "=", or one a request cannot carry: a number
            that is not finite (nan, inf, 1e999), or text that is not UTF-8 (an argument's invalid
            bytes, a lone surrogate), which failed inside the HTTP client with a traceback; an integer
            longer than Python converts; a value ``read`` cannot read (``_Unreadable``).
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"{what} entries look like name=value, got {reprlib.repr(pair)}")
        try:
            out[name] = read(value)
            problem = _unsendable(name) or _unsendable(out[name])
        except _Unreadable as exc:
            problem = str(exc)
        if problem:
            raise typer.BadParameter(f"{what} {reprlib.repr(pair)}: {problem}")
    return out


def parse_options(pairs: list[str]) -> dict[str, Any]:
    """``--option KEY=VALUE`` entries as a job's strategy_options: VALUE read as JSON (5, 0.1, true,
    "ei"), a bare word as a string (ei)."""
    return parse_pairs(pairs, "--option", _json_or_word)


def _json_or_word(text: str) -> Any:
    _refuse_long_integer(text)
    try:
        return json.loads(text)
    except ValueError:
        return text
    except RecursionError:
        raise _Unreadable(f"nested deeper than {MAX_NESTING}") from None


def _scalar_list(text: str) -> list[int | float | str]:
    """A --set value: comma-separated scalars."""
    return [_scalar(item) for item in text.split(",")]


def _unsendable(value: Any) -> str | None:
    """Why a request's JSON body cannot carry ``value``, or None. Iterative: a value nested about as
    deep as json.loads allows ran out of recursion here, or in the HTTP client's encoder."""
    pending = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if depth > MAX_NESTING:
            return f"nested deeper than {MAX_NESTING}"
        if isinstance(item, float) and not math.isfinite(item):
            return "not a finite number"
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "not valid UTF-8 text"
        if isinstance(item, dict):
            pending += [(part, depth + 1) for pair in item.items() for part in pair]
        elif isinstance(item, list):
            pending += [(part, depth + 1) for part in item]
    return None


def fail(message: str, code: int = 1) -> NoReturn:
    """One red line on standard error, then exit ``code``. ``message`` is printed as written: text from
    users or the server ("[/x]", a name pattern's "[a-z]") is never read as rich markup, and its control
    characters are shown escaped (a server's detail with an ESC sequence reached the terminal)."""
    err_console.print(f"[red]error[/]: {escape(one_line(message))}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """API errors become one red line on standard error and exit code 1, never a traceback."""
    try:
        return fn(*args, **kwargs)
    except ApiError as exc:
        fail(exc.message)


def require_text(value: str, param_hint: str) -> str:
    """``value`` if a request can carry it (UTF-8 text), else a usage error naming the argument."""
    if _unsendable(value):
        raise typer.BadParameter(f"{reprlib.repr(value)} is not valid UTF-8 text", param_hint=param_hint)
    return value


def finite_seconds(value: float | None, option: str, minimum: float | None = 0.0) -> float | None:
    """``value`` (seconds) if it is a finite number of at least ``minimum`` (None: any), else a usage
    error naming ``option``: NaN compared false with every deadline (`tune --worker-timeout nan`
    followed forever)."""
    if value is not None and not (math.isfinite(value) and (minimum is None or value >= minimum)):
        bound = "" if minimum is None else f" >= {minimum:g}"
        raise typer.BadParameter(f"{value} is not a finite number of seconds{bound}", param_hint=option)
    return value


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


def cells(*values: Any) -> list[str]:
    """A table row's cells as written (rich reads a cell's text as markup: "[/x]" raised MarkupError), their
    control characters shown escaped (a job's status message or an owner's name is the server's text)."""
    return [escape(terminal_text(str(value))) for value in values]


def format_config(config: dict[str, Any]) -> str:
    """A config with its parameter names: ``block_size_x=64 tile_size=4``."""
    return " ".join(f"{name}={value}" for name, value in config.items())


def resolve_job_id(client: Client, job_id: str) -> str:
    """A full job id, or the one job whose id starts with ``job_id`` (at least 4 characters)."""
    text = job_id.strip().lower()
    if UUID_RE.match(text):
        return text
    if len(text) < 4 or not re.fullmatch(r"[0-9a-f-]+", text):
        raise typer.BadParameter(f"{job_id!r} is not a job id or a prefix of one (4+ hex characters)")
    matches: list[str] = []
    offset = 0
    while True:
        page = call(client.jobs, limit=500, offset=offset)
        matches += [j["id"] for j in page["items"] if j["id"].startswith(text)]
        offset += len(page["items"])
        if offset >= page["total"] or not page["items"]:
            break
    if not matches:
        fail(f"no job id starts with {job_id!r}")
    if len(matches) > 1:
        fail(f"{job_id!r} matches {len(matches)} jobs ({', '.join(matches[:3])}…); give more of it")
    return matches[0]


def tune(
    kernel: str = typer.Argument(..., help="kernel name (see `kernelfarm kernels`)"),
    gpu: str = typer.Option(..., help="GPU model slug or device name"),
    problem: list[str] = typer.Option([], help="problem value name=value (repeatable)"),
    budget: int = typer.Option(None, help="number of trials"),
    budget_seconds: float = typer.Option(None, help="wall-time budget, seconds"),
    parallelism: int = typer.Option(4, help="trials in flight at once"),
    strategy: str = typer.Option(None, help="search strategy (default: the farm's)"),
    option: list[str] = typer.Option(
        [], "--option", "-o", help="strategy option KEY=VALUE, VALUE as JSON or a bare word (repeatable)"
    ),
    objective: str = typer.Option(
        "time",
        help="what to minimize: time, energy (per launch, NVML: cuda workers) or time+energy "
        "(a Pareto front: `best --objective pareto`)",
    ),
    seed: int = typer.Option(None),
    profile: str = typer.Option("all", help="ncu profile: all, top_k or none"),
    warm_start: bool = typer.Option(
        True, "--warm-start/--cold-start", help="learn from this kernel and problem's trials on other GPU models"
    ),
    set_values: list[str] = typer.Option([], "--set", help="restrict a parameter: name=v1,v2,..."),
    constraint: list[str] = typer.Option([], help="extra constraint expression (repeatable)"),
    follow: bool = typer.Option(True, help="follow with a progress bar and print the result"),
    top: int = typer.Option(10, min=1, max=TRIALS_PAGE_MAX, help="rows in the top-trials table"),
    worker_timeout: float = typer.Option(600, help="give up following (exit 3) after this long without a live worker"),
    progress_every: float = typer.Option(10, help="seconds between progress lines when stdout is not a terminal"),
) -> None:
    """Submit a tuning job, follow it, then print the best config and the top trials.

    Exit code: 0 when the job completed with a result; 1 when it failed, was cancelled or no trial
    succeeded; 3 when no live worker served its GPU model for --worker-timeout seconds; 130 when
    interrupted (Ctrl-C) while following: the job keeps running on the farm."""
    finite_seconds(worker_timeout, "--worker-timeout")
    finite_seconds(progress_every, "--progress-every")
    finite_seconds(budget_seconds, "--budget-seconds", minimum=None)  # the server says what a budget may be
    client = cli_context().client()
    body: dict[str, Any] = {
        "kernel": kernel, "gpu_model": gpu, "problem": parse_pairs(problem, "--problem"),
        "parallelism": parallelism, "profile": profile, "warm_start": warm_start, "objective": objective,
        "strategy_options": parse_options(option),
    }  # fmt: skip
    for key, value in (("budget_trials", budget), ("budget_seconds", budget_seconds), ("strategy", strategy),
                       ("seed", seed)):  # fmt: skip
        if value is not None:
            body[key] = value
    if set_values or constraint:
        restricted = parse_pairs(set_values, "--set", _scalar_list)
        body["space"] = {"parameters": restricted, "constraints": constraint}
    job = call(client.submit, body)
    try:  # from here on the job exists: Ctrl-C stops the waiting, not the job (say where it is)
        what = f"{job['kernel']} {job['problem']} on {job['gpu_model']}"
        console.print(f"job [bold]{escape(job['id'])}[/] submitted: {escape(what)}")
        if not follow:
            return
        final = follow_job(client, job["id"], progress_every=progress_every, worker_timeout=worker_timeout)
    except KeyboardInterrupt:
        job_id = job["id"]
        err_console.print(f"interrupted: job {job_id} keeps running on the farm (`kernelfarm job {job_id}` shows "
                          f"it, `kernelfarm cancel {job_id}` cancels it)", markup=False, highlight=False,
                          soft_wrap=True)  # fmt: skip
        raise typer.Exit(EXIT_INTERRUPTED) from None
    report(client, final, top)
    raise typer.Exit(exit_code(final))


def follow_job(client: Client, job_id: str, poll: float = 0.5, progress_every: float = 10.0,
               worker_timeout: float | None = None) -> dict[str, Any]:  # fmt: skip
    """Follow a job to its end: a progress bar on a terminal, else a line every ``progress_every``
    seconds (CI logs). Gives up with exit code EXIT_NO_WORKER once no live worker of the job's GPU
    model has been seen for ``worker_timeout`` seconds (the job itself stays queued)."""
    job = call(client.job, job_id)
    if not console.is_terminal:
        return _follow_plain(client, job, poll, progress_every, worker_timeout)
    total = job["budget_trials"]
    watch = WorkerWatch(client, job["gpu_model"], worker_timeout)
    status = TextColumn("{task.fields[best]}", markup=False)  # the server's status message, as written
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  status, console=console, transient=False) as bar:  # fmt: skip
        task = bar.add_task("tuning", total=total, best="")
        while True:
            done = job["progress"]["complete"] + job["progress"]["failed"]
            waiting = watch.check(job)
            best = f"best {job['best']['time_ms']:.4f} ms" if job["best"] else (waiting or job["status_message"][:60])
            bar.update(task, completed=done, total=total or max(done, 1), best=best)
            if job["state"] in FINISHED:
                break
            time.sleep(poll)
            job = call(client.job, job_id)
    return job


class WorkerWatch:
    """Is a live worker serving the job's GPU model? Asked only while nothing of the job runs."""

    def __init__(self, client: Client, gpu_model: str, timeout: float | None) -> None:
        self.client, self.gpu_model, self.timeout = client, gpu_model, timeout
        self.last_seen = time.monotonic()
        self._asked_at = 0.0
        self._live = True

    def check(self, job: dict[str, Any]) -> str | None:
        """None while a worker is there (or the job runs/ended); else "waiting: no live worker ...".
        Exits with EXIT_NO_WORKER after ``timeout`` seconds without one."""
        now = time.monotonic()
        if job["state"] in FINISHED or job["progress"]["running"] > 0:
            self.last_seen = now
            return None
        if now - self._asked_at >= 2.0:
            self._asked_at = now
            workers = call(self.client.workers)
            self._live = any(w["gpu_model"] == self.gpu_model and w["live"] for w in workers)
        if self._live:
            self.last_seen = now
            return None
        waited = now - self.last_seen
        if self.timeout is not None and waited >= self.timeout:
            job_id = job["id"]
            fail(f"no live worker for GPU model {self.gpu_model} for {waited:.0f} s; job {job_id} is still "
                 f"{job['state']} (`kernelfarm cancel {job_id}` drops it)", EXIT_NO_WORKER)  # fmt: skip
        return f"waiting: no live worker for GPU model {self.gpu_model} ({waited:.0f} s)"


def _follow_plain(client: Client, job: dict[str, Any], poll: float, every: float,
                  worker_timeout: float | None) -> dict[str, Any]:  # fmt: skip
    watch = WorkerWatch(client, job["gpu_model"], worker_timeout)
    started = time.monotonic()
    last_line = -every
    while True:
        waiting = watch.check(job)
        now = time.monotonic()
        if job["state"] in FINISHED:
            break
        if now - last_line >= every:
            last_line = now
            console.print(_progress_line(job, waiting, now - started), markup=False, highlight=False, soft_wrap=True)
        time.sleep(poll)
        job = call(client.job, job["id"])
    return job


def _progress_line(job: dict[str, Any], waiting: str | None, elapsed: float) -> str:
    progress = job["progress"]
    budget = f"/{job['budget_trials']}" if job["budget_trials"] else ""
    best = f"; best {job['best']['time_ms']:.4f} ms" if job["best"] else ""
    line = (f"[{elapsed:4.0f} s] {job['state']}: {progress['complete'] + progress['failed']}{budget} trials done "
            f"({progress['complete']} complete, {progress['failed']} failed, "
            f"{progress['running']} running){best}")  # fmt: skip
    return f"{line}; {waiting}" if waiting else f"{line}; {job['status_message']}"


def exit_code(job: dict[str, Any]) -> int:
    """0 only for a job that completed with a result."""
    return 0 if job["state"] == "complete" and job["best"] is not None else EXIT_NO_RESULT


PRIOR_STATES = {
    "in_use": "used",
    "held_back": "held back: the job's own measurements had not yet shown that they rank its configs alike",
    "dropped": "dropped: the job's own measurements disagreed with them",
}


def describe_prior(prior: dict[str, Any]) -> str:
    """A job's ``warm_start_prior`` in words (the API's WarmStartPrior)."""
    if prior["state"] == "none":
        return "cold start: no other GPU model had tuned this kernel and problem"
    sources = ", ".join(escape(s) for s in prior["sources"])
    state = escape(PRIOR_STATES.get(prior["state"], prior["state"]))
    return f"warm start: {prior['trials']} trials from {sources} ({state})"


def report(client: Client, job: dict[str, Any], top: int) -> None:
    console.print(f"job {escape(job['id'])}: [bold]{escape(job['state'])}[/] — {escape(job['status_message'])}")
    progress = job["progress"]
    console.print(f"trials: {progress['complete']} complete, {progress['failed']} failed, {progress['total']} total")
    if job.get("warm_start_prior"):  # a finished job's status message no longer says it
        console.print(describe_prior(job["warm_start_prior"]), highlight=False)
    if job["best"]:
        energy = job["best"].get("energy_mj")
        measured = f"{job['best']['time_ms']:.4f} ms" + (f", {energy:.4g} mJ" if energy is not None else "")
        console.print(f"[green]best config[/] ({measured}): {escape(format_config(job['best']['config']))}")
    page = call(client.trials, job["id"], order="time", state="complete", limit=top)
    table = Table("rank", "trial #", "time ms (median)", "p20", "p80", "config", title=f"top {top} trials")
    for rank, trial in enumerate(page["items"], 1):
        table.add_row(str(rank), str(trial["seq"] + 1), f"{trial['time_ms']:.4f}", f"{trial['time_p20_ms']:.4f}",
                      f"{trial['time_p80_ms']:.4f}", escape(format_config(trial["config"])))  # fmt: skip
    console.print(table)
    if job["state"] == "complete" and job["best"] is None:
        console.print("[red]no trial succeeded[/]: the job has no result")


def best(
    kernel: str = typer.Argument(...),
    gpu: str = typer.Option(..., help="GPU model slug or device name"),
    problem: list[str] = typer.Option([], help="name=value (repeatable)"),
    objective: str = typer.Option(
        "time",
        help="time (with fallbacks), energy (the most frugal config) or pareto (the time/energy front); "
        "the last two: exact matches only",
    ),
    as_json: bool = typer.Option(False, "--json", help="print the raw JSON"),
) -> None:
    """The best known config for a kernel, problem and GPU model (with the fallback used)."""
    client = cli_context().client()
    result = call(client.best, kernel, gpu, parse_pairs(problem, "--problem"), objective)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    matched = f"{result['matched_gpu_model']} {result['matched_problem']}"
    console.print(f"[green]{escape(result['match'])}[/] match: {escape(matched)}")
    energy = f", {result['energy_mj']:.4g} mJ" if result.get("energy_mj") is not None else ""
    console.print(f"{result['time_ms']:.4f} ms{energy}  config {escape(json.dumps(result['config']))}", highlight=False)
    console.print(f"from trial {result['trial_id']} of job {result['job_id']}; backend "
                  f"{result['provenance'].get('backend', '?')}", markup=False)  # fmt: skip
    if result.get("pareto"):
        front = Table("time ms", "energy mJ", "config", "trial", title="time/energy front, fastest first")
        for point in result["pareto"]:
            front.add_row(f"{point['time_ms']:.4f}", f"{point['energy_mj']:.4g}", escape(point["config_key"]),
                          str(point["trial_id"]))  # fmt: skip
        console.print(front)


def jobs(state: str = typer.Option(None), kernel: str = typer.Option(None),
         limit: int = typer.Option(20, min=1, max=JOBS_PAGE_MAX), offset: int = typer.Option(0, min=0, max=MAX_OFFSET),
         as_json: bool = JSON_OPTION) -> None:  # fmt: skip
    """List jobs, newest first."""
    page = call(cli_context().client().jobs, state=state, kernel=kernel, limit=limit, offset=offset)
    if as_json:
        print_json(page)
        return
    table = Table("id", "kernel", "gpu model", "state", "trials", "best ms", "message",
                  title=f"jobs {offset + 1}-{offset + len(page['items'])} of {page['total']}")  # fmt: skip
    table.columns[0].no_wrap = True  # the full id, to copy (`job` and `cancel` also take a prefix)
    for job in page["items"]:
        best_ms = f"{job['best']['time_ms']:.4f}" if job["best"] else ""
        table.add_row(*cells(job["id"], job["kernel"], job["gpu_model"], job["state"], job["progress"]["total"],
                             best_ms, job["status_message"][:50]))  # fmt: skip
    console.print(table)


def show(job_id: str = typer.Argument(..., help="a job id or a unique prefix of one"),
         top: int = typer.Option(10, min=1, max=TRIALS_PAGE_MAX, help="rows in the top-trials table"),
         as_json: bool = JSON_OPTION) -> None:  # fmt: skip
    """Show one job and its top trials."""
    client = cli_context().client()
    job = call(client.job, resolve_job_id(client, job_id))
    if as_json:
        job["top_trials"] = call(client.trials, job["id"], order="time", state="complete", limit=top)["items"]
        print_json(job)
        return
    report(client, job, top)


def cancel(
    job_id: str = typer.Argument(..., help="a job id or a unique prefix of one"), as_json: bool = JSON_OPTION
) -> None:
    """Cancel a job (idempotent)."""
    client = cli_context().client()
    job = call(client.cancel, resolve_job_id(client, job_id))
    if as_json:
        print_json(job)
        return
    console.print(f"job {job['id']}: {job['state']}", markup=False, highlight=False)


def workers(include_all: bool = typer.Option(False, "--all", help="include stopped workers"),
            as_json: bool = JSON_OPTION) -> None:  # fmt: skip
    """Online workers and their GPU models."""
    rows = call(cli_context().client().workers, include_all)
    if as_json:
        print_json(rows)
        return
    table = Table("name", "backend", "gpu model", "gpu", "cc", "driver", "last heartbeat", "live")
    for w in rows:
        table.add_row(*cells(w["name"], w["backend"], w["gpu_model"], w["gpu_name"], w["compute_capability"] or "",
                            w["driver_version"] or "", w["last_heartbeat"], "yes" if w["live"] else "no"))  # fmt: skip
    console.print(table)


def kernels(as_json: bool = JSON_OPTION) -> None:
    """Kernels, their search spaces and their problem parameters (what `tune --problem` takes)."""
    rows = call(cli_context().client().kernels)
    if as_json:
        print_json(rows)
        return
    table = Table("kernel", "backends", "problem (default)", "parameters", "valid configs", "recorded on")
    for k in rows:
        problem = " ".join(f"{p['name']}={k['default_problem'].get(p['name'], '?')}" for p in k["problem_params"])
        table.add_row(*cells(k["name"], ",".join(k["backends"]), problem, ", ".join(k["parameters"]),
                            k["valid_configs_default_problem"], ",".join(k["recorded_gpu_models"])))  # fmt: skip
    console.print(table)


def save_json(path: Path | None, data: Any) -> None:
    if path:
        path.write_text(json.dumps(data, indent=2, default=str))
