"""Session status `no_answer`: the task ended because the model's replies stayed empty.

Revision ID: 0007
Revises: 0006
"""

from alembic import op

revision = "0007"
down_revision = "0006"
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
)
_AFTER = (*_BEFORE, "no_answer")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.drop_constraint("ck_sessions_status", "sessions", type_="check")
    op.create_check_constraint("ck_sessions_status", "sessions", _in("status", _AFTER))


def downgrade() -> None:
    op.execute("UPDATE sessions SET status = 'failed' WHERE status = 'no_answer'")
    op.drop_constraint("ck_sessions_status", "sessions", type_="check")
    op.create_check_constraint("ck_sessions_status", "sessions", _in("status", _BEFORE))
