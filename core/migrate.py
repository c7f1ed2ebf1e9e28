"""Apply Alembic migrations programmatically (``kernelfarm db upgrade``, the stack, the tests)."""

from __future__ import annotations

from importlib.resources import files

from alembic import command
from alembic.config import Config

# The migrations ship inside the package (kernelfarm.migrations), found wherever it is installed.
MIGRATIONS_DIR = files("kernelfarm.migrations")


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation: a literal % in a password must be doubled.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str) -> None:
    command.downgrade(alembic_config(database_url), revision)
