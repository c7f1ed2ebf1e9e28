"""profile claims: when a worker took a profile batch

A profile request was re-sent only when unanswered for profile_redispatch_after_seconds (300 s), so
a batch message lost with the broker idled its job for minutes. With the time a worker claimed it,
an unclaimed request is re-sent as fast as an unclaimed trial, and a claimed one when its worker
died or the batch overran (issue 18, item 13).

Revision ID: 0004
Revises: 0003
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("trial_profiles", sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("trial_profiles", "claimed_at")
