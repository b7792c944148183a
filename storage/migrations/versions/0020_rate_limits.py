"""rate_limits: the gateway's per-key request buckets, shared by every gateway process
(storage/rate_limits.py), so N gateways allow a key its rate once, not N times.

UNLOGGED: a take commits without a WAL flush, and losing the table (a crash, a failover)
only refills every bucket.

Revision ID: 0020
Revises: 0019
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rate_limits",
        sa.Column("limiter", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("tat", sa.Double(), nullable=False),
        sa.Column("allowed", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("limiter", "subject"),
        prefixes=["UNLOGGED"],
    )


def downgrade() -> None:
    op.drop_table("rate_limits")
