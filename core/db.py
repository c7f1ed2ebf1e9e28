"""Engine and the one session context manager that owns commit, rollback and close."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, create_engine
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from kernelfarm.core.settings import Settings, get_settings

_factories: dict[str, sessionmaker[Session]] = {}


def get_engine(url: str | None = None) -> Engine:
    return _factory(url).kw["bind"]


def _factory(url: str | None) -> sessionmaker[Session]:
    database_url = url or get_settings().require_database_url()
    if database_url not in _factories:
        # pool_pre_ping: a Postgres restart must not leave dead connections in the pool.
        settings = get_settings()
        engine = create_engine(
            database_url, pool_pre_ping=True, pool_size=5, max_overflow=10,
            pool_timeout=settings.database_pool_timeout_seconds, connect_args=connect_args(settings),
        )  # fmt: skip
        _factories[database_url] = sessionmaker(bind=engine, expire_on_commit=False)
    return _factories[database_url]


def connect_args(settings: Settings) -> dict[str, object]:
    """libpq options: bounded connect, a server-side statement timeout, and TCP keepalives so a
    peer that vanished (host down, network cut) is noticed in ~25 s instead of the kernel's hours."""
    return {
        "connect_timeout": settings.database_connect_timeout_seconds,
        "options": f"-c statement_timeout={int(settings.database_statement_timeout_seconds * 1000)}",
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
    }


@contextmanager
def session_scope(url: str | None = None) -> Iterator[Session]:
    """A transaction: commit on success, roll back on any exception, always close."""
    session = _factory(url)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def dispose_engines() -> None:
    """Forget pooled connections: call in a child after fork (sockets must not be shared)."""
    for factory in _factories.values():
        factory.kw["bind"].dispose(close=False)
    _factories.clear()


# SQLSTATE classes that mean "the server cannot serve now", not "the request is wrong":
# 08 connection exception, 57 operator intervention (shutdown, statement/lock timeout as 57014),
# 53 insufficient resources.
_UNAVAILABLE_SQLSTATE = ("08", "57", "53")


def is_unavailable(exc: DBAPIError) -> bool:
    """Does this database error say PostgreSQL is unreachable or cannot serve now (rather than that
    the statement is wrong)?"""
    if isinstance(exc, OperationalError | InterfaceError) or exc.connection_invalidated:
        return True
    return sqlstate(exc).startswith(_UNAVAILABLE_SQLSTATE)


def sqlstate(exc: DBAPIError) -> str:
    """PostgreSQL's SQLSTATE of the error ("23505"), or "" when the driver gave none."""
    return getattr(exc.orig, "pgcode", None) or ""
