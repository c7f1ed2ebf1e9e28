"""job step failures: how many of a job's coordinator steps in a row raised an error that is not a lost
connection (tuner/step_failures.py); the job fails at settings.max_step_failures instead of
being stepped, and failing, forever

Revision ID: 0014
Revises: 0013
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("step_failures", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    op.drop_column("jobs", "step_failures")
