"""tool_effects: the effects ledger of effectful tool calls, per (tenant, idempotency key).

Replaces write_file's per-workspace `.agent/effects` files; a row is committed as started
before an effectful call runs and settled with its result.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_STATES = ("started", "retrying", "completed", "failed", "reconciled", "in_doubt")


def upgrade() -> None:
    op.create_table(
        "tool_effects",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.String(512), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("tool_call_id", sa.String(128), nullable=False),
        sa.Column("tool_name", sa.String(128), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False, server_default="1"),
        sa.Column(
            "started_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "idempotency_key"),
        sa.CheckConstraint(
            f"state IN ({', '.join(repr(s) for s in _STATES)})", name="ck_tool_effects_state"
        ),
    )
    op.create_index("ix_tool_effects_session", "tool_effects", ["tenant_id", "session_id"])


def downgrade() -> None:
    op.drop_index("ix_tool_effects_session", table_name="tool_effects")
    op.drop_table("tool_effects")
