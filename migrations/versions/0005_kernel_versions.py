"""kernel versions: uploaded kernel manifests with their files, immutable and content-addressed;
what each GPU worker can run besides the catalogue (kernel plugins, uploaded Python)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24 02:00:00.000000

A row per upload: (name, version) numbers the uploads of one name 1, 2, ...; ``content_hash`` (sha256
over the canonical manifest, every file and the recording) is unique, so uploading the same content
twice returns the first version. Rows are never updated: a job pins one through kernels.version.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "kernel_versions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False, unique=True),
        # JSON text, not JSONB: JSONB reorders keys, and the order of tune_params defines config keys
        sa.Column("manifest", sa.Text, nullable=False),
        sa.Column("files", postgresql.JSONB, nullable=False),  # file name -> text
        sa.Column("recording", sa.LargeBinary, nullable=True),  # the Kernel Tuner cache file, as uploaded
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.UniqueConstraint("name", "version"),
    )
    op.add_column(
        "gpu_workers",
        sa.Column("capabilities", postgresql.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
    )


def downgrade() -> None:
    op.drop_column("gpu_workers", "capabilities")
    op.drop_table("kernel_versions")
