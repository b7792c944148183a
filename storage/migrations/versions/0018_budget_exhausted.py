"""budget_exhausted: a session parked at its budget until someone raises it.

Revision ID: 0018
Revises: 0017
"""

from alembic import op

revision = "0018"
down_revision = "0017"
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
)
_AFTER = (*_BEFORE, "budget_exhausted")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.drop_constraint("ck_sessions_status", "sessions", type_="check")
    op.create_check_constraint("ck_sessions_status", "sessions", _in("status", _AFTER))


def downgrade() -> None:
    op.execute("UPDATE sessions SET status = 'running' WHERE status = 'budget_exhausted'")
    op.drop_constraint("ck_sessions_status", "sessions", type_="check")
    op.create_check_constraint("ck_sessions_status", "sessions", _in("status", _BEFORE))
