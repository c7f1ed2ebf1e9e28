"""trial losses: how many times a trial's worker died while measuring it, apart from its attempts
(core/store/trials.py reap_expired_leases)

Revision ID: 0011
Revises: 0010
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Trials already retried count every earlier attempt as a loss, as the cap did until now.
    op.add_column("trials", sa.Column("losses", sa.Integer(), nullable=False, server_default="0"))
    op.execute("UPDATE trials SET losses = greatest(attempt - 1, 0) WHERE state IN ('queued', 'running')")
    op.execute(
        "UPDATE trials SET losses = attempt WHERE state = 'failed' AND failure_kind = 'crash' "
        "AND failure_message LIKE 'worker lost %'"
    )


def downgrade() -> None:
    op.drop_column("trials", "losses")
