"""An exception summed up for a job's status message (core/error_summary.py): a database error is its class
and the database's first line, never the SQL statement, its parameters or PostgreSQL's DETAIL. With real
errors of PostgreSQL through SQLAlchemy and psycopg2."""

from __future__ import annotations

from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError, StatementError

from kernelfarm.core.error_summary import summarize
from tests.conftest import raised

SECRET = "a-value-of-another-field"


def test_database_errors_are_their_class_and_the_databases_first_line(database_url: str) -> None:
    engine = create_engine(database_url)
    with engine.connect() as connection:
        connection.execute(text("CREATE TEMPORARY TABLE kf_summary (k varchar(4) PRIMARY KEY)"))
        too_long = raised(lambda: connection.execute(text("INSERT INTO kf_summary VALUES (:k)"), {"k": SECRET}))
        connection.rollback()
        connection.execute(text("CREATE TEMPORARY TABLE kf_summary (k varchar(32) PRIMARY KEY)"))
        connection.execute(text("INSERT INTO kf_summary VALUES (:k)"), {"k": SECRET})
        duplicate = raised(lambda: connection.execute(text("INSERT INTO kf_summary VALUES (:k)"), {"k": SECRET}))
        connection.rollback()
        unbound = raised(lambda: connection.execute(text("SELECT :k")))
    engine.dispose()
    for error in (too_long, duplicate):  # what they said before
        assert isinstance(error, DBAPIError) and "INSERT INTO kf_summary" in str(error) and SECRET in str(error)
    assert isinstance(unbound, StatementError) and "[SQL: SELECT" in str(unbound)

    assert summarize(too_long) == "DataError: value too long for type character varying(4)"
    assert summarize(duplicate) == 'IntegrityError: duplicate key value violates unique constraint "kf_summary_pkey"'
    assert summarize(unbound) == "StatementError: A value is required for bind parameter 'k'"


def test_other_errors_are_their_class_and_text_within_the_limit() -> None:
    assert summarize(TypeError("'int' object is not iterable")) == "TypeError: 'int' object is not iterable"
    assert summarize(ValueError("x" * 5000)) == ("ValueError: " + "x" * 5000)[:1000]
    assert summarize(ValueError("x" * 50), limit=20) == "ValueError: xxxxxxxx"
