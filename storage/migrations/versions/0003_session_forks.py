"""Forks: a session started from another session's committed items up to one ordinal
(sessions.forked_from, sessions.forked_at), sharing them by reference.

Additive with an online path (docs/DEPLOY.md): two nullable columns, a foreign key added
NOT VALID and validated separately (no long lock: every existing row is NULL), and an
index on the new column, so code of 0.1.0 runs against this schema unchanged.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("forked_from", sa.Uuid, nullable=True))
    op.add_column("sessions", sa.Column("forked_at", sa.BigInteger, nullable=True))
    op.create_foreign_key(
        "fk_sessions_forked_from",
        "sessions",
        "sessions",
        ["tenant_id", "forked_from"],
        ["tenant_id", "id"],
        postgresql_not_valid=True,
    )
    op.execute("ALTER TABLE sessions VALIDATE CONSTRAINT fk_sessions_forked_from")
    op.create_index("ix_sessions_forked_from", "sessions", ["tenant_id", "forked_from"])
    op.create_check_constraint(
        "ck_sessions_fork_point",
        "sessions",
        "(forked_from IS NULL) = (forked_at IS NULL) AND (forked_at IS NULL OR forked_at >= 0)",
    )


def downgrade() -> None:
    op.drop_constraint("ck_sessions_fork_point", "sessions", type_="check")
    op.drop_index("ix_sessions_forked_from", "sessions")
    op.drop_constraint("fk_sessions_forked_from", "sessions", type_="foreignkey")
    op.drop_column("sessions", "forked_at")
    op.drop_column("sessions", "forked_from")
