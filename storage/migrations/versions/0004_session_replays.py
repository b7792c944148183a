"""Replays: a fork of a recorded session at its first step whose model replies are served
from that session's record while the requests match (sessions.replay: {"of": the recorded
session's id, "live_tools": [tool names run live rather than replayed]}).

Additive with an online path (docs/DEPLOY.md): one nullable column, so code of 0.1.0 runs
against this schema unchanged.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("replay", JSONB, nullable=True))


def downgrade() -> None:
    op.drop_column("sessions", "replay")
