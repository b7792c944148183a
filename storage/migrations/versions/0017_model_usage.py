"""model_usage: each model reply's usage as the provider reported it, per (tenant, the
reply's idempotency key), with its cost from the worker's price table (NULL: unpriced).

Committed in the transaction that commits the reply, under the reply's key: a retried or
replayed step finds the row and adds nothing. No foreign key to sessions: what was spent
stays spent when an archive moves a session's hot rows to the cold tier.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "model_usage",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.String(512), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("agent", sa.Text(), nullable=False),
        sa.Column("provider", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("purpose", sa.String(16), nullable=False, server_default="chat"),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cached_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("cost_usd", sa.Numeric(20, 9), nullable=True),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.PrimaryKeyConstraint("tenant_id", "idempotency_key"),
        sa.CheckConstraint(
            "input_tokens >= 0 AND output_tokens >= 0 AND cached_tokens >= 0",
            name="ck_model_usage_tokens",
        ),
    )
    op.create_index("ix_model_usage_session", "model_usage", ["tenant_id", "session_id"])
    op.create_index("ix_model_usage_day", "model_usage", ["tenant_id", "day"])


def downgrade() -> None:
    op.drop_index("ix_model_usage_day", table_name="model_usage")
    op.drop_index("ix_model_usage_session", table_name="model_usage")
    op.drop_table("model_usage")
