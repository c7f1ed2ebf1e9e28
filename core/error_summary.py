"""An exception summed up for a message every reader of a job sees (its status message).

SQLAlchemy's text of a failed statement carries the statement and its bound parameters (``[SQL: INSERT
INTO trials ...] [parameters: {...}]``): the schema and other rows' values, in a message shown to everyone
who may read the job. A database error is summed up as its class and the first line of what the database
said (``DataError: value too long for type character varying(1024)``); the lines after it, PostgreSQL's
DETAIL with the values of the offending row among them, are left out too. The traceback stays in the log.
"""

from __future__ import annotations

from sqlalchemy.exc import SQLAlchemyError, StatementError


def summarize(exc: BaseException, limit: int = 1000) -> str:
    """``"<class>: <message>"``, at most ``limit`` characters, never a SQL statement or its parameters."""
    if isinstance(exc, StatementError):
        said = _first_line(_own_text(exc.orig)) if exc.orig is not None else ""
    else:
        said = _own_text(exc)
    return (f"{type(exc).__name__}: {said}" if said else type(exc).__name__)[:limit]


def _own_text(exc: BaseException) -> str:
    """What an exception says, without the link to its documentation that SQLAlchemy's errors add."""
    if isinstance(exc, SQLAlchemyError) and exc.args and isinstance(exc.args[0], str):
        return exc.args[0]
    return str(exc)


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""
