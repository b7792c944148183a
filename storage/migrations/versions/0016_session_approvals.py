"""Sessions keep their task's approvals: the policies that add approvals, the loosenings an
authorised caller made, and who made them.

Model calls read them from the session instead of receiving them with every activity
input, and the record of who loosened which tool's approval is committed with the session
it applies to. NULL for sessions started before: their model calls still carry the task's
policies, which then only add approvals. Adding a nullable column without a default is a
catalog-only change (no table rewrite, a brief ACCESS EXCLUSIVE lock).

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("approvals", postgresql.JSONB(), nullable=True))


def downgrade() -> None:
    op.drop_column("sessions", "approvals")
