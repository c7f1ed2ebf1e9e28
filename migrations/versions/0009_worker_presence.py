"""worker presence: when a worker process took its presence lock (core/store/workers.py)

Revision ID: 0009
Revises: 0008
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("gpu_workers", sa.Column("presence_since", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("gpu_workers", "presence_since")
