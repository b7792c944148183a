"""Agent definitions: which agent a session runs, and the agent a turn's context config
was recorded for (its name, fingerprint and approval policies).

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "sessions",
        sa.Column("agent_definition", sa.Text(), nullable=False, server_default="default"),
    )
    op.add_column(
        "context_configs",
        sa.Column(
            "agent", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")
        ),
    )


def downgrade() -> None:
    op.drop_column("context_configs", "agent")
    op.drop_column("sessions", "agent_definition")
