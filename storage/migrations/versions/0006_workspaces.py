"""Workspaces: the project a session names, and its workspace while packed in object storage.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("project", sa.Text(), nullable=True))
    op.add_column("sessions", sa.Column("workspace_sha256", sa.Text(), nullable=True))
    op.add_column("sessions", sa.Column("workspace_bytes", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("sessions", "workspace_bytes")
    op.drop_column("sessions", "workspace_sha256")
    op.drop_column("sessions", "project")
