"""kernel versions bump the best stamp: a new upload changes which source /v1/best answers for

Revision ID: 0013
Revises: 0012

/v1/best answers from the trials of an uploaded kernel's latest version (its source hash). The API
caches those answers until the kernel's stamp in ``best_versions`` changes (0003, api/best_cache.py),
and only trial writes bumped it: after a new version, the cached answer for the old source was served
until one of the new version's trials became a best. The trigger bumps the stamp in the transaction
that stores the version.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION kf_kernel_versions_best_version() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM kf_bump_best_version(NEW.name);
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        """CREATE TRIGGER kernel_versions_best_version_insert AFTER INSERT ON kernel_versions FOR EACH ROW
            EXECUTE FUNCTION kf_kernel_versions_best_version()"""
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER kernel_versions_best_version_insert ON kernel_versions")
    op.execute("DROP FUNCTION kf_kernel_versions_best_version()")
