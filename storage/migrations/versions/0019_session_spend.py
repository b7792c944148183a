"""session_spend: what each session has spent, kept as running sums, so a task's budget
check before every model step is one primary-key read however long the session is
(summing model_usage and counting tool-call items grew with it: 2.2 ms p50 at 1,000 steps,
docs/BENCHMARKS.md). model_usage.tool_calls: the calls each reply asked for, so the sums
can be rebuilt from model_usage alone.

A row grows in the transaction that commits a reply, and only when that reply's usage row
was inserted (not on a retry or replay that found it): counted once, like model_usage.

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "model_usage",
        sa.Column("tool_calls", sa.Integer(), nullable=False, server_default="0"),
    )
    op.create_table(
        "session_spend",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("cost_usd", sa.Numeric(20, 9), nullable=False, server_default="0"),
        sa.Column("unpriced_replies", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("tool_calls", sa.Integer(), nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint("tenant_id", "session_id"),
    )
    # Sessions that replied before: their sums, from what model_usage holds.
    op.execute(
        """
        INSERT INTO session_spend (tenant_id, session_id, tokens, cost_usd, unpriced_replies)
        SELECT tenant_id, session_id, SUM(input_tokens + output_tokens),
               COALESCE(SUM(cost_usd), 0), COUNT(*) - COUNT(cost_usd)
          FROM model_usage GROUP BY tenant_id, session_id
        """
    )


def downgrade() -> None:
    op.drop_table("session_spend")
    op.drop_column("model_usage", "tool_calls")
