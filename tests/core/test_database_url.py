"""DATABASE_URL as the farm reads it (core/settings.py, postgresql_url): the bare postgresql:// and
postgres:// that users and hosting platforms write connect with psycopg2, the driver kernelfarm installs
(SQLAlchemy 2.1 reads them as psycopg 3: ModuleNotFoundError 'psycopg'); a URL no engine can be made of
is refused where a database is needed, with the reason and the form to use, never quoting the URL (it may
hold a password); the commands that need none do not read it (DATABASE_URL is shared with other programs).
It was a traceback from wherever the engine was made: ArgumentError for "garbage", TypeError
'connect_timeout' for sqlite, ValueError for a port that is no number."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from kernelfarm.core.db import session_scope
from kernelfarm.core.settings import DATABASE_SCHEME, Settings, postgresql_url
from kernelfarm.services import free_port

FORM = "(use postgresql+psycopg2://USER:PASSWORD@HOST:5432/DATABASE)"


@pytest.mark.parametrize(
    ("url", "read"),
    [
        ("postgresql://u:p@db:5432/farm", "postgresql+psycopg2://u:p@db:5432/farm"),
        ("postgres://u@db/farm", "postgresql+psycopg2://u@db/farm"),
        ("PostgreSQL://u@db/farm", "postgresql+psycopg2://u@db/farm"),
        ("postgres+psycopg2://u@db/farm", "postgresql+psycopg2://u@db/farm"),
        ("postgresql+psycopg2://u:p%40ss@[::1]:5432/farm?sslmode=require",
         "postgresql+psycopg2://u:p%40ss@[::1]:5432/farm?sslmode=require"),
        ("postgresql:///farm?host=/run/postgresql", "postgresql+psycopg2:///farm?host=/run/postgresql"),
    ],
)  # fmt: skip
def test_a_postgresql_url_is_read_with_the_driver_kernelfarm_installs(url: str, read: str) -> None:
    assert postgresql_url(url) == read
    assert make_url(read).drivername == DATABASE_SCHEME


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("garbage", f"not a database URL {FORM}"),
        ("sqlite:///x.db", f"kernelfarm keeps its data in PostgreSQL, not 'sqlite' {FORM}"),
        ("mysql+pymysql://u:p@db/farm", f"kernelfarm keeps its data in PostgreSQL, not 'mysql' {FORM}"),
        ("postgresql+psycopg://u:p@db/farm", f"kernelfarm connects with psycopg2, not 'psycopg' {FORM}"),
        ("postgresql+asyncpg://u:p@db/farm", f"kernelfarm connects with psycopg2, not 'asyncpg' {FORM}"),
        ("postgresql://u:secret@db:x5432/farm", f"its port is not a number {FORM}"),
        ("postgresql://u:secret/farm", f"its port is not a number {FORM}"),  # the password read as the port
    ],
)
def test_a_url_no_engine_can_be_made_of_is_refused_with_the_form_to_use(url: str, says: str) -> None:
    with pytest.raises(ValueError) as refused:
        postgresql_url(url)
    assert str(refused.value) == says and "secret" not in says


@pytest.mark.parametrize(
    "url",
    ["garbage", "://x", "postgresql://u@db:x/f", "postgresql://u@db:5/f", "postgresql://u:p:q@db/f",
     "postgresql://u:p/q@db/f", "postgresql://u@[::1/f", "postgresql://u@db:/f", "postgresql://u@db:5432,db2:5432/f"],
)  # fmt: skip
def test_what_is_refused_is_what_sqlalchemy_cannot_parse(url: str) -> None:
    """The grammar is SQLAlchemy's, copied (importing SQLAlchemy would cost every worker's start ~0.1 s)."""
    try:
        make_url(url)
        parses = True
    except (ArgumentError, ValueError):
        parses = False
    try:
        postgresql_url(url)
        accepted = True
    except ValueError:
        accepted = False
    assert accepted == parses


def test_the_environments_bare_url_is_read_as_psycopg2s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KERNELFARM_DATABASE_URL", raising=False)
    monkeypatch.setenv("DATABASE_URL", "postgresql://farm@db/farm")
    assert Settings().database_url == "postgresql+psycopg2://farm@db/farm"
    monkeypatch.setenv("DATABASE_URL", "")
    assert Settings().database_url == ""  # not set: the embedded stack's


def test_a_bare_url_of_a_real_database_connects(database_url: str) -> None:
    bare = "postgresql://" + database_url.split("://", 1)[1]
    with session_scope(Settings(database_url=bare).database_url) as session:
        assert session.execute(text("SELECT 1")).scalar() == 1


def kernelfarm(tmp_path: Path, database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in ``tmp_path``: a relative sqlite URL that got through made its file there (`db upgrade`
    migrated it)."""
    env = {k: v for k, v in os.environ.items() if k != "KERNELFARM_DATABASE_URL"}
    env |= {"DATABASE_URL": database_url, "KERNELFARM_STATE_DIR": str(tmp_path / "state")}
    return subprocess.run([sys.executable, "-P", "-m", "kernelfarm", *args], env=env, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)  # fmt: skip


@pytest.mark.parametrize(
    "args", [["token", "list"], ["token", "create", "--scope", "read"], ["token", "revoke", "x"], ["db", "upgrade"]]
)
def test_the_cli_connects_to_a_bare_url_with_psycopg2(tmp_path: Path, args: list[str]) -> None:
    """Nothing listens there: "cannot reach the database" is psycopg2's answer (it was ModuleNotFoundError)."""
    done = kernelfarm(tmp_path, f"postgresql://u:secret@127.0.0.1:{free_port()}/farm", *args)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.startswith("error: cannot reach the database (connection to server at "), done.stderr


@pytest.mark.parametrize("args", [["token", "list"], ["db", "upgrade"], ["up"]])
@pytest.mark.parametrize(
    ("url", "says"),
    [("garbage", "not a database URL"), ("sqlite:///x.db", "kernelfarm keeps its data in PostgreSQL, not 'sqlite'")],
)
def test_the_cli_refuses_a_wrong_url_in_one_line(tmp_path: Path, args: list[str], url: str, says: str) -> None:
    done = kernelfarm(tmp_path, url, *args)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr == f"error: invalid setting: DATABASE_URL: {says} {FORM}\n"
    assert not (tmp_path / "state").exists() and not (tmp_path / "x.db").exists()  # nothing started, nothing made
