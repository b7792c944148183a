"""A task's own check: the check a start declared (sessions.task_check), whether the
answer a session completed with was checked (sessions.checked), and the two statuses a
check and the progress rule end a task with (check_failed, stuck).

Additive with an online path (docs/DEPLOY.md): two nullable columns, and a status check
that only grows, so code of 0.1.0 runs against this schema unchanged.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002"
down_revision = "0001"
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
    "quota_exhausted",
    "frozen",
)
_AFTER = (*_BEFORE, "check_failed", "stuck")


def _status_check(statuses: tuple[str, ...]) -> None:
    op.drop_constraint("ck_sessions_status", "sessions", type_="check")
    listed = ", ".join(f"'{s}'" for s in statuses)
    op.create_check_constraint("ck_sessions_status", "sessions", f"status IN ({listed})")


def upgrade() -> None:
    op.add_column("sessions", sa.Column("task_check", JSONB, nullable=True))
    op.add_column("sessions", sa.Column("checked", sa.Boolean, nullable=True))
    _status_check(_AFTER)


def downgrade() -> None:
    _status_check(_BEFORE)
    op.drop_column("sessions", "checked")
    op.drop_column("sessions", "task_check")
