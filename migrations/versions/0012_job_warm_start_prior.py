"""job warm-start prior: which prior a warm job used, as the coordinator last saw it (tuner/history.py
prior_use); kept when the job ends, whose status message then no longer names it

Revision ID: 0012
Revises: 0011
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # NULL for jobs before this revision (not recorded), cold-by-request jobs, and jobs not stepped yet.
    op.add_column("jobs", sa.Column("warm_start_prior", postgresql.JSONB(), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "warm_start_prior")
