"""model profiles (kernelfarm profile-model reports)

Revision ID: 0008
Revises: 0007
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "model_profiles",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("model", sa.String(length=256), nullable=False),
        sa.Column("device_name", sa.String(length=128), nullable=False),
        sa.Column("gpu_model", sa.String(length=128), nullable=False),
        sa.Column("dtype", sa.String(length=16), nullable=False),
        sa.Column("batch", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("report", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_model_profiles_created", "model_profiles", ["created_at"], unique=False)
    op.create_index(op.f("ix_model_profiles_gpu_model"), "model_profiles", ["gpu_model"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_model_profiles_gpu_model"), table_name="model_profiles")
    op.drop_index("ix_model_profiles_created", table_name="model_profiles")
    op.drop_table("model_profiles")
