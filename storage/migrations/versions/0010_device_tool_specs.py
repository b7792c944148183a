"""devices.tool_specs: the specs (name, description, JSON schema, effect) of the MCP tools
a device serves from its device-local servers, so the cloud offers them to the model
without running those servers.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("devices", sa.Column("tool_specs", postgresql.JSONB(), nullable=True))


def downgrade() -> None:
    op.drop_column("devices", "tool_specs")
