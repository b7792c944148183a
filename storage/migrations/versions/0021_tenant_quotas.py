"""tenant_controls, tenant_spend: a tenant's quotas and kill switch, and its spend by UTC
day (storage/quotas.py); the statuses quota_exhausted and frozen; sessions by tenant and
status (the running and parked tasks a quota'd start counts).

tenant_spend grows in the transaction that commits a reply, only when its usage row was
inserted (counted once, as session_spend); it starts from what model_usage holds.

Revision ID: 0021
Revises: 0020
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_BEFORE = (
    "created",
    "running",
    "waiting_approval",
    "waiting_device",
    "completed",
    "failed",
    "cancelled",
    "archived",
    "no_answer",
    "waiting_model",
    "budget_exhausted",
)
_AFTER = (*_BEFORE, "quota_exhausted", "frozen")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.create_table(
        "tenant_controls",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("tokens_per_day", sa.BigInteger(), nullable=True),
        sa.Column("cost_usd_per_day", sa.Numeric(20, 9), nullable=True),
        sa.Column("tokens_per_month", sa.BigInteger(), nullable=True),
        sa.Column("cost_usd_per_month", sa.Numeric(20, 9), nullable=True),
        sa.Column("running_tasks", sa.Integer(), nullable=True),
        sa.Column("parked_tasks", sa.Integer(), nullable=True),
        sa.Column("starts_per_minute", sa.Integer(), nullable=True),
        sa.Column("frozen", sa.Boolean(), nullable=False, server_default="false"),
        sa.Column("frozen_by", sa.Text(), nullable=True),
        sa.Column("frozen_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_by", sa.Text(), nullable=True),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.PrimaryKeyConstraint("tenant_id"),
    )
    op.create_table(
        "tenant_spend",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("cost_usd", sa.Numeric(20, 9), nullable=False, server_default="0"),
        sa.Column("unpriced_replies", sa.Integer(), nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint("tenant_id", "day"),
    )
    op.execute(
        """
        INSERT INTO tenant_spend (tenant_id, day, tokens, cost_usd, unpriced_replies)
        SELECT tenant_id, day, SUM(input_tokens + output_tokens),
               COALESCE(SUM(cost_usd), 0), COUNT(*) - COUNT(cost_usd)
          FROM model_usage GROUP BY tenant_id, day
        """
    )
    op.create_index("ix_sessions_tenant_status", "sessions", ["tenant_id", "status"])
    op.drop_constraint("ck_sessions_status", "sessions", type_="check")
    op.create_check_constraint("ck_sessions_status", "sessions", _in("status", _AFTER))


def downgrade() -> None:
    op.execute(
        "UPDATE sessions SET status = 'running' WHERE status IN ('quota_exhausted', 'frozen')"
    )
    op.drop_constraint("ck_sessions_status", "sessions", type_="check")
    op.create_check_constraint("ck_sessions_status", "sessions", _in("status", _BEFORE))
    op.drop_index("ix_sessions_tenant_status", table_name="sessions")
    op.drop_table("tenant_spend")
    op.drop_table("tenant_controls")
