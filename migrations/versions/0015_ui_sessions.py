"""dashboard sessions: a login stores a session of its own, and the browser's cookie holds that
session's secret, not the API token (core/store/ui_sessions.py). The token in the cookie reached every
other port of the host (browsers do not separate cookies by port) and worked there as a bearer token
until revoked; logging out only deleted the browser's copy.

Revision ID: 0015
Revises: 0014
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "ui_sessions",
        sa.Column("id", sa.BigInteger(), primary_key=True),
        sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("token_id", sa.Integer(), sa.ForeignKey("api_tokens.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_ui_sessions_token_id", "ui_sessions", ["token_id"])


def downgrade() -> None:
    op.drop_index("ix_ui_sessions_token_id", table_name="ui_sessions")
    op.drop_table("ui_sessions")
