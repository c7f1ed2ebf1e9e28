"""The ``kernelfarm`` command line (typer + rich)."""

from __future__ import annotations

import logging

import typer

from kernelfarm.commands import admin, demo, jobs, profile_model, serve, stack_cmds, strategy_benchmark

app = typer.Typer(help="kernelfarm: distributed GPU kernel auto-tuning.", no_args_is_help=True,
                  pretty_exceptions_enable=False)  # fmt: skip
app.add_typer(admin.db_app, name="db")
app.add_typer(admin.token_app, name="token")
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
app.command("bench-strategies")(strategy_benchmark.benchmark_strategies)
app.command("profile-model")(profile_model.profile_model)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app()
