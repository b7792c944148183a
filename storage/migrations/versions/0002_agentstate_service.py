"""AgentState as a service: session tree, turns with recorded context configs,
content-addressed prompts and tool schemas, versioned compactions, scoped memories.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)
SESSION_STATUSES = (
    "created",
    "running",
    "waiting_approval",
    "waiting_device",
    "completed",
    "failed",
    "cancelled",
    "archived",
)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.add_column("sessions", sa.Column("parent_id", sa.Uuid(), nullable=True))
    op.add_column("sessions", sa.Column("root_id", sa.Uuid(), nullable=True))
    op.add_column(
        "sessions", sa.Column("agent_name", sa.Text(), nullable=False, server_default="agent")
    )
    op.add_column("sessions", sa.Column("workflow_run_id", sa.String(256), nullable=True))
    op.execute("UPDATE sessions SET root_id = id WHERE root_id IS NULL")
    op.create_foreign_key("fk_sessions_parent", "sessions", "sessions", ["parent_id"], ["id"])
    op.create_foreign_key("fk_sessions_root", "sessions", "sessions", ["root_id"], ["id"])
    op.create_check_constraint("ck_sessions_status", "sessions", _in("status", SESSION_STATUSES))
    op.create_index("ix_sessions_parent", "sessions", ["tenant_id", "parent_id"])
    op.create_index("ix_sessions_root", "sessions", ["tenant_id", "root_id"])

    op.create_table(
        "context_blobs",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("sha256", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", _TS, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("tenant_id", "sha256"),
        sa.CheckConstraint(_in("kind", ("system_prompt", "tool_schemas")), name="ck_blobs_kind"),
    )
    op.create_table(
        "context_configs",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("sha256", sa.Text(), nullable=False),
        sa.Column("provider", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("system_prompt_sha256", sa.Text(), nullable=False),
        sa.Column("tool_schemas_sha256", sa.Text(), nullable=False),
        sa.Column("budget", postgresql.JSONB(), nullable=False),
        sa.Column("created_at", _TS, nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("tenant_id", "sha256", name="uq_context_configs_tenant_sha"),
    )
    op.create_table(
        "turns",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("turn_no", sa.Integer(), nullable=False),
        sa.Column("first_ordinal", sa.BigInteger(), nullable=False),
        sa.Column("context_config_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", _TS, nullable=False, server_default=sa.func.now()),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], name="fk_turns_session"),
        sa.ForeignKeyConstraint(
            ["context_config_id"], ["context_configs.id"], name="fk_turns_config"
        ),
        sa.UniqueConstraint("session_id", "turn_no", name="uq_turns_session_no"),
    )
    op.add_column("items", sa.Column("turn_id", sa.Uuid(), nullable=True))
    op.add_column("items", sa.Column("tokens", sa.Integer(), nullable=False, server_default="0"))
    op.create_foreign_key("fk_items_turn", "items", "turns", ["turn_id"], ["id"])

    op.create_table(
        "compactions",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("previous_compaction_id", sa.Uuid(), nullable=True),
        sa.Column("covers_through_ordinal", sa.BigInteger(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("summary_tokens", sa.Integer(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.String(512), nullable=False),
        sa.Column("created_at", _TS, nullable=False, server_default=sa.func.now()),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], name="fk_compactions_session"),
        sa.ForeignKeyConstraint(
            ["previous_compaction_id"], ["compactions.id"], name="fk_compactions_previous"
        ),
        sa.UniqueConstraint("session_id", "version", name="uq_compactions_session_version"),
        sa.UniqueConstraint("idempotency_key", name="uq_compactions_idempotency_key"),
    )

    op.create_table(
        "memories",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("scope_type", sa.Text(), nullable=False),
        sa.Column("scope_id", sa.Text(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("source", postgresql.JSONB(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False, server_default="1"),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column("supersedes_id", sa.Uuid(), nullable=True),
        sa.Column("deleted_at", _TS, nullable=True),
        sa.Column("idempotency_key", sa.String(512), nullable=True),
        sa.Column("created_at", _TS, nullable=False, server_default=sa.func.now()),
        sa.ForeignKeyConstraint(["supersedes_id"], ["memories.id"], name="fk_memories_supersedes"),
        sa.UniqueConstraint("idempotency_key", name="uq_memories_idempotency_key"),
        sa.CheckConstraint(
            _in("scope_type", ("user", "project", "agent")), name="ck_memories_scope"
        ),
        sa.CheckConstraint(
            _in("created_by", ("agent", "user", "extractor")), name="ck_memories_created_by"
        ),
    )
    op.create_index(
        "ix_memories_scope_live",
        "memories",
        ["tenant_id", "scope_type", "scope_id", "created_at"],
        postgresql_where=sa.text("deleted_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_table("memories")
    op.drop_table("compactions")
    op.drop_constraint("fk_items_turn", "items", type_="foreignkey")
    op.drop_column("items", "tokens")
    op.drop_column("items", "turn_id")
    op.drop_table("turns")
    op.drop_table("context_configs")
    op.drop_table("context_blobs")
    op.drop_index("ix_sessions_root", "sessions")
    op.drop_index("ix_sessions_parent", "sessions")
    op.drop_constraint("ck_sessions_status", "sessions", type_="check")
    op.drop_constraint("fk_sessions_root", "sessions", type_="foreignkey")
    op.drop_constraint("fk_sessions_parent", "sessions", type_="foreignkey")
    for column in ("workflow_run_id", "agent_name", "root_id", "parent_id"):
        op.drop_column("sessions", column)
