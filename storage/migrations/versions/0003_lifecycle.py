"""Artifact lifecycle and the cold tier: unreachable marks for mark-and-sweep GC, and the
index of sessions archived to object storage.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("agent_artifacts", sa.Column("unreachable_since", _TS, nullable=True))
    op.create_check_constraint(
        "ck_artifacts_status", "agent_artifacts", "status IN ('active', 'unreachable')"
    )
    op.create_index(
        "ix_artifacts_unreachable",
        "agent_artifacts",
        ["unreachable_since"],
        postgresql_where=sa.text("status = 'unreachable'"),
    )
    op.create_table(
        "session_archives",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("snapshot_key", sa.Text(), nullable=False),
        sa.Column("snapshot_sha256", sa.Text(), nullable=False),
        sa.Column("snapshot_bytes", sa.BigInteger(), nullable=False),
        sa.Column("item_count", sa.Integer(), nullable=False),
        sa.Column("archived_at", _TS, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("tenant_id", "session_id"),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], name="fk_archives_session"),
    )


def downgrade() -> None:
    op.drop_table("session_archives")
    op.drop_index("ix_artifacts_unreachable", "agent_artifacts")
    op.drop_constraint("ck_artifacts_status", "agent_artifacts", type_="check")
    op.drop_column("agent_artifacts", "unreachable_since")
