"""presence epoch: when this database server last (re)initialised, as an unlogged row; and when a
trial's lease was ended because its worker was gone (core/store/workers.py, core/store/trials.py)

Revision ID: 0010
Revises: 0009
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # UNLOGGED: PostgreSQL empties it in crash recovery (which ends every session, and every presence
    # lock with it, but keeps pg_postmaster_start_time()) and on a standby promoted by a failover, so
    # an empty table means "the server reinitialised since anyone wrote it" to every role.
    op.execute(
        "CREATE UNLOGGED TABLE presence_epoch (id smallint PRIMARY KEY CHECK (id = 1), "
        "started_at timestamptz NOT NULL DEFAULT now())"
    )
    op.add_column("trials", sa.Column("lease_ended_at", sa.DateTime(timezone=True), nullable=True))
    # An earlier version ended a lease by writing '-infinity' as the trial's heartbeat, and the reaper
    # left it there: the last real heartbeat is lost (NULL); a trial not reaped yet still gets reaped.
    op.execute(
        "UPDATE trials SET heartbeat_at = NULL, "
        "lease_ended_at = CASE WHEN state = 'running' THEN now() END WHERE heartbeat_at = '-infinity'"
    )


def downgrade() -> None:
    op.execute("UPDATE trials SET heartbeat_at = '-infinity' WHERE state = 'running' AND lease_ended_at IS NOT NULL")
    op.drop_column("trials", "lease_ended_at")
    op.execute("DROP TABLE presence_epoch")
