"""waiting_model: a session whose model call retries through a provider outage, and the
detail of that wait (last error, attempt, next try).

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
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
)
_AFTER = (*_BEFORE, "waiting_model")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.drop_constraint("ck_sessions_status", "sessions", type_="check")
    op.create_check_constraint("ck_sessions_status", "sessions", _in("status", _AFTER))
    op.add_column("sessions", sa.Column("wait_detail", postgresql.JSONB(), nullable=True))


def downgrade() -> None:
    op.drop_column("sessions", "wait_detail")
    op.execute("UPDATE sessions SET status = 'running' WHERE status = 'waiting_model'")
    op.drop_constraint("ck_sessions_status", "sessions", type_="check")
    op.create_check_constraint("ck_sessions_status", "sessions", _in("status", _BEFORE))
