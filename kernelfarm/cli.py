"""The ``kernelfarm`` command line (typer + rich)."""

from __future__ import annotations

import logging
import sys

import typer
from rich.console import Console
from rich.markup import escape
from sqlalchemy.exc import OperationalError

from kernelfarm.client import ApiError
from kernelfarm.commands import (
    admin,
    ci,
    demo,
    export,
    jobs,
    kernel_cmds,
    profile_model,
    serve,
    stack_cmds,
    strategy_benchmark,
)
from kernelfarm.context import CliError
from kernelfarm.core.errors import KernelfarmError
from kernelfarm.stack import StackError

app = typer.Typer(help="kernelfarm: distributed GPU kernel auto-tuning.", no_args_is_help=True,
                  pretty_exceptions_enable=False)  # fmt: skip
app.add_typer(admin.db_app, name="db")
app.add_typer(admin.token_app, name="token")
app.add_typer(kernel_cmds.kernel_app, name="kernel")
app.command()(stack_cmds.up)
app.command()(stack_cmds.down)
app.command()(stack_cmds.status)
app.command("serve-api")(serve.serve_api)
app.command()(serve.coordinator)
app.command()(serve.worker)
app.command()(jobs.tune)
app.command()(jobs.best)
app.command()(jobs.jobs)
app.command("job")(jobs.show)
app.command()(jobs.cancel)
app.command()(jobs.workers)
app.command()(jobs.kernels)
app.command()(demo.demo)
app.command()(export.export)
app.add_typer(ci.ci_app, name="ci")
app.command("bench-strategies")(strategy_benchmark.benchmark_strategies)
app.command("profile-model")(profile_model.profile_model)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        app()
    except (CliError, StackError, ApiError, KernelfarmError) as exc:  # a user can cause or fix these: one line
        _fail(str(exc))
    except OperationalError as exc:  # the database of DATABASE_URL or of the stack does not answer
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
        _fail(f"cannot reach the database ({reason}); is the stack running? `kernelfarm status` says")


def _fail(message: str) -> None:
    Console(stderr=True).print(f"[red]error[/]: {escape(message)}", highlight=False, soft_wrap=True)
    sys.exit(1)
