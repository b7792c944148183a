"""AgentState: sessions, items, agent_artifacts, agent_artifact_refs.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("model_config", postgresql.JSONB(), nullable=False),
        sa.Column("workflow_id", sa.String(256), nullable=True),
        sa.Column("next_ordinal", sa.BigInteger(), nullable=False, server_default="1"),
        sa.Column("created_at", _TS, nullable=False, server_default=sa.func.now()),
        sa.Column("updated_at", _TS, nullable=False, server_default=sa.func.now()),
    )
    op.create_index("ix_sessions_tenant_id", "sessions", ["tenant_id"])

    op.create_table(
        "agent_artifacts",
        sa.Column("artifact_id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("sha256", sa.Text(), nullable=False),
        sa.Column("uri", sa.Text(), nullable=False),
        sa.Column("content_type", sa.Text(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("created_at", _TS, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("tenant_id", "artifact_id"),
        sa.UniqueConstraint("tenant_id", "sha256", name="uq_artifacts_tenant_sha"),
    )

    op.create_table(
        "agent_artifact_refs",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("artifact_id", sa.Uuid(), nullable=False),
        sa.Column("owner_type", sa.Text(), nullable=False),
        sa.Column("owner_id", sa.Text(), nullable=False),
        sa.Column("required_for_resume", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("expires_at", _TS, nullable=True),
        sa.Column("created_at", _TS, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("tenant_id", "owner_type", "owner_id", "artifact_id"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "artifact_id"],
            ["agent_artifacts.tenant_id", "agent_artifacts.artifact_id"],
            name="fk_refs_artifact",
        ),
        sa.CheckConstraint(
            "owner_type IN ('checkpoint', 'trajectory', 'business_output')",
            name="ck_refs_owner_type",
        ),
    )
    op.create_index(
        "ix_artifact_refs_artifact", "agent_artifact_refs", ["tenant_id", "artifact_id"]
    )

    op.create_table(
        "items",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column(
            "session_id",
            sa.Uuid(),
            sa.ForeignKey("sessions.id", name="fk_items_session"),
            nullable=False,
        ),
        sa.Column("ordinal", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("text", sa.Text(), nullable=False, server_default=""),
        sa.Column("tool_call_id", sa.String(128), nullable=True),
        sa.Column("tool_name", sa.String(128), nullable=True),
        sa.Column("data", postgresql.JSONB(), nullable=False, server_default="{}"),
        sa.Column("idempotency_key", sa.String(512), nullable=False),
        sa.Column("artifact_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", _TS, nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("idempotency_key", name="uq_items_idempotency_key"),
        sa.UniqueConstraint("session_id", "ordinal", name="uq_items_session_ordinal"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "artifact_id"],
            ["agent_artifacts.tenant_id", "agent_artifacts.artifact_id"],
            name="fk_items_artifact",
        ),
        sa.CheckConstraint(
            "kind IN ('user_message', 'assistant_message', 'tool_call', 'tool_result',"
            " 'approval', 'error')",
            name="ck_items_kind",
        ),
    )
    op.create_index("ix_items_session_tool_call", "items", ["session_id", "tool_call_id"])


def downgrade() -> None:
    op.drop_table("items")
    op.drop_table("agent_artifact_refs")
    op.drop_table("agent_artifacts")
    op.drop_table("sessions")
