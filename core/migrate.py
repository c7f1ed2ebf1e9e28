"""Apply Alembic migrations programmatically (``kernelfarm db upgrade``, the stack, the tests)."""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from alembic.config import Config

# The migrations ship inside the package (kernelfarm.migrations), found wherever it is installed.
MIGRATIONS_DIR = files("kernelfarm.migrations")


# Alembic is imported when a migration runs, not with this module: the CLI imports it for `db upgrade`
# and `up`, and every command (a worker's start-up above all) would pay ~0.1 s for it.


def alembic_config(database_url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation: a literal % in a password must be doubled.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str) -> None:
    from alembic import command

    command.downgrade(alembic_config(database_url), revision)
