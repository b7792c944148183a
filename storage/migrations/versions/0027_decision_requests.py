"""decision_requests: what a person's decision says that must not travel in workflow
history, staged until the loop accepts the decision (storage/decision_requests.py).

Revision ID: 0027
Revises: 0026
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "decision_requests",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("tool_call_id", sa.Text(), nullable=True),
        sa.Column("data", JSONB(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.PrimaryKeyConstraint("tenant_id", "id"),
    )
    op.create_index("ix_decision_requests_created", "decision_requests", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_decision_requests_created", table_name="decision_requests")
    op.drop_table("decision_requests")
