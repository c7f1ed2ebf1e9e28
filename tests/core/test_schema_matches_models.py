"""The database the migrations build is the one the models describe. Nothing compared them: a column
added to a model without a migration (or the other way round) showed only when a query used it, on
a deployed farm. Alembic's autogenerate comparison of the migrated test database with the models."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from kernelfarm.core.models import Base

# Tables the migrations make that no model maps, each for a reason.
UNMAPPED = {
    # UNLOGGED (emptied by crash recovery, which is what it detects), read and written as SQL text:
    # core/store/workers.py, migrations/versions/0010_presence_epoch.py
    "presence_epoch",
}


def _mapped(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    return not (type_ == "table" and name in UNMAPPED)


def test_the_migrated_schema_is_the_models(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"include_object": _mapped})
            differences = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert differences == [], "\n".join(map(str, differences))
