"""admissions: every model call, tool call and sub-agent the gate admitted, under the key of
what it admitted, with a model call's reservation while it runs; session_spend.sub_agents.
session_spend.tool_calls now counts tool calls admitted (storage/admissions.py).

Revision ID: 0026
Revises: 0025
"""

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "session_spend",
        sa.Column("sub_agents", sa.Integer(), nullable=False, server_default="0"),
    )
    op.create_table(
        "admissions",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.String(512), nullable=False),
        sa.Column("budget_session_id", sa.Uuid(), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("reserved_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("reserved_cost_usd", sa.Numeric(20, 9), nullable=True),
        sa.Column("open", sa.Boolean(), nullable=False, server_default="false"),
        sa.Column(
            "renewed_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.func.now(),
        ),
        sa.PrimaryKeyConstraint("tenant_id", "idempotency_key"),
        sa.CheckConstraint("kind IN ('model', 'tool', 'sub_agent')", name="ck_admissions_kind"),
        sa.CheckConstraint("reserved_tokens >= 0", name="ck_admissions_reserved"),
    )
    op.create_index(
        "ix_admissions_open",
        "admissions",
        ["tenant_id", "budget_session_id"],
        postgresql_where=sa.text("open"),
    )


def downgrade() -> None:
    op.drop_index("ix_admissions_open", table_name="admissions")
    op.drop_table("admissions")
    op.drop_column("session_spend", "sub_agents")
