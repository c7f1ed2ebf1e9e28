"""job idempotency keys: the same Idempotency-Key and owner on POST /v1/jobs give the same job

Revision ID: 0007
Revises: 0005
Create Date: 2026-11-24 01:40:00.000000

One row per (owner, key), written in the transaction that creates the job: a concurrent second
request with the same key waits on the primary key until the first commits, finds the row and
answers with that job (api/jobs_service.py). ``request_hash`` refuses a key reused for another body.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_idempotency_keys",
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("job_id", sa.UUID(), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("owner", "key"),
    )


def downgrade() -> None:
    op.drop_table("job_idempotency_keys")
