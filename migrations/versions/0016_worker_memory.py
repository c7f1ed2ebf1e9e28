"""worker memory: each worker records its GPU's total memory (NVML), so the API can refuse a job whose
problem cannot fit in the memory of its GPU model (api/jobs_service.py); NULL where the backend reports
none (replay workers, and rows of workers that registered before this column)

Revision ID: 0016
Revises: 0015
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("gpu_workers", sa.Column("memory_bytes", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("gpu_workers", "memory_bytes")
