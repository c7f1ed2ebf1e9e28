"""The ``kernelfarm`` command line (typer + rich).

``kernelfarm worker`` is the command a supervisor runs again each time a GPU worker dies, so it loads
only its own module: the full command set (the API client, the stack, SQLAlchemy, rich's console...)
cost a replacement worker ~0.45 CPU-s more before it exec'd Celery. Every other command builds the
full app; ``kernelfarm.cli.app`` is that app, built on first access.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import typer


def build_app() -> typer.Typer:
    """Every command, as ``kernelfarm --help`` lists them."""
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
    return app


def _worker_app() -> typer.Typer:
    """``kernelfarm worker`` alone (the callback keeps ``worker`` a subcommand, as in the full app)."""
    from kernelfarm.commands import serve

    app = typer.Typer(help="kernelfarm: distributed GPU kernel auto-tuning.", pretty_exceptions_enable=False)
    app.callback()(lambda: None)
    app.command()(serve.worker)
    return app


_app: typer.Typer | None = None


def __getattr__(name: str) -> Any:
    global _app
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _app is None:
        _app = build_app()
    return _app


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app = _worker_app() if sys.argv[1:2] == ["worker"] else build_app()
    try:
        app()
    except Exception as exc:
        # The error types are imported here, when one happened, not at every start (see the docstring).
        from httpx import InvalidURL
        from pydantic import ValidationError
        from sqlalchemy.exc import OperationalError

        from kernelfarm.client import ApiError
        from kernelfarm.context import CliError
        from kernelfarm.core.errors import KernelfarmError
        from kernelfarm.core.settings import settings_problem
        from kernelfarm.stack import StackError

        if isinstance(exc, CliError | StackError | ApiError | KernelfarmError):  # a user can cause or fix these
            _fail(str(exc))
        if isinstance(exc, ValidationError) and exc.title == "Settings":  # a KERNELFARM_* variable is wrong
            _fail(f"invalid setting: {settings_problem(exc)}")
        if isinstance(exc, InvalidURL):  # neither an httpx.HTTPError nor a ValueError: the clients turn theirs
            _fail(f"cannot build the request's URL: {exc}")  # into ApiError; this is for one they did not see
        if isinstance(exc, OperationalError):  # the database of DATABASE_URL or of the stack does not answer
            reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
            _fail(f"cannot reach the database ({reason}); is the stack running? `kernelfarm status` says")
        raise


def _fail(message: str) -> None:
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, emoji=False).print(f"[red]error[/]: {escape(message)}", highlight=False, soft_wrap=True)
    sys.exit(1)
