"""Schema and token administration: ``kernelfarm db upgrade``, ``kernelfarm token create``."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from kernelfarm.context import cli_context
from kernelfarm.core.db import session_scope
from kernelfarm.core.errors import KernelfarmError
from kernelfarm.core.migrate import upgrade
from kernelfarm.core.store import tokens

console = Console()
db_app = typer.Typer(help="Database schema (Alembic migrations).", no_args_is_help=True)
token_app = typer.Typer(help="API tokens (stored hashed; shown once).", no_args_is_help=True)


@db_app.command("upgrade")
def db_upgrade(revision: str = typer.Argument("head")) -> None:
    """Apply migrations to DATABASE_URL (or the embedded stack's database)."""
    upgrade(cli_context().database_url(), revision)
    console.print(f"schema at revision [bold]{revision}[/]")


@token_app.command("create")
def token_create(
    scope: list[str] = typer.Option(
        ..., "--scope", help="read, submit, kernels (upload manifests) or admin (repeatable)"
    ),
    name: str = typer.Option("cli", help="a name to recognise and revoke the token by"),
) -> None:
    """Create a token and print it (the only time it is shown)."""
    try:
        with session_scope(cli_context().database_url()) as session:
            token = tokens.create_token(session, name, scope)
    except KernelfarmError as exc:
        raise typer.BadParameter(str(exc)) from None
    typer.echo(token)


@token_app.command("list")
def token_list() -> None:
    with session_scope(cli_context().database_url()) as session:
        rows = tokens.list_tokens(session)
        table = Table("name", "scopes", "created", "last used", "revoked")
        for row in rows:
            table.add_row(row.name, ",".join(row.scopes), str(row.created_at), str(row.last_used_at or ""),
                          str(row.revoked_at or ""))  # fmt: skip
    console.print(table)


@token_app.command("revoke")
def token_revoke(name: str) -> None:
    """Revoke every active token with this name."""
    with session_scope(cli_context().database_url()) as session:
        count = tokens.revoke_token(session, name)
    console.print(f"revoked {count} token(s) named {name!r}")
