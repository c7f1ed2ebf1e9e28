"""Schema and token administration: ``kernelfarm db upgrade``, ``kernelfarm token create``."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kernelfarm.commands.jobs import cells, fail, require_text
from kernelfarm.context import cli_context
from kernelfarm.core.db import session_scope
from kernelfarm.core.errors import KernelfarmError
from kernelfarm.core.migrate import upgrade
from kernelfarm.core.store import tokens

console = Console(emoji=False)
db_app = typer.Typer(help="Database schema (Alembic migrations).", no_args_is_help=True)
token_app = typer.Typer(help="API tokens (stored hashed; shown once).", no_args_is_help=True)


@db_app.command("upgrade")
def db_upgrade(revision: str = typer.Argument("head")) -> None:
    """Apply migrations to DATABASE_URL (or the embedded stack's database)."""
    from alembic.util import CommandError

    require_text(revision, "REVISION")
    try:
        upgrade(cli_context().database_url(), revision)
    except CommandError as exc:  # a revision the migrations do not have ("Can't locate revision ...")
        fail(f"cannot upgrade to {revision!r}: {exc} (`head` is the newest schema)")
    console.print(f"schema at revision [bold]{escape(revision)}[/]")


@token_app.command("create")
def token_create(
    scope: list[str] = typer.Option(
        ..., "--scope", help="read, submit, kernels (upload manifests) or admin (repeatable)"
    ),
    name: str = typer.Option("cli", help="a name to recognise and revoke the token by"),
) -> None:
    """Create a token and print it (the only time it is shown)."""
    require_text(name, "--name")
    for item in scope:
        require_text(item, "--scope")
    try:
        with session_scope(cli_context().database_url()) as session:
            token = tokens.create_token(session, name, scope)
    except KernelfarmError as exc:
        raise typer.BadParameter(str(exc)) from None
    typer.echo(token)


@token_app.command("list")
def token_list(as_json: bool = typer.Option(False, "--json", help="print JSON (for scripts)")) -> None:
    """Tokens by name, with scopes and dates (never the token itself)."""
    with session_scope(cli_context().database_url()) as session:
        rows: list[dict[str, Any]] = [
            {"name": row.name, "scopes": list(row.scopes), "created_at": row.created_at,
             "last_used_at": row.last_used_at, "revoked_at": row.revoked_at}
            for row in tokens.list_tokens(session)
        ]  # fmt: skip
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    table = Table("name", "scopes", "created", "last used", "revoked")
    for item in rows:
        table.add_row(*cells(item["name"], ",".join(item["scopes"]), item["created_at"], item["last_used_at"] or "",
                             item["revoked_at"] or ""))  # fmt: skip
    console.print(table)


@token_app.command("revoke")
def token_revoke(name: str) -> None:
    """Revoke every active token with this name."""
    require_text(name, "NAME")
    with session_scope(cli_context().database_url()) as session:
        count = tokens.revoke_token(session, name)
        known = count > 0 or any(row.name == name for row in tokens.list_tokens(session))
    if not known:
        # "revoked 0 token(s)" and success read as done: a misspelt name left the real token active.
        fail(f"no token is named {name!r} (`kernelfarm token list` shows them)")
    already = "" if count else " (every token of that name was revoked before)"
    console.print(f"revoked {count} token(s) named {name!r}{already}", markup=False, highlight=False)
