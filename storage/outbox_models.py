"""The trajectory outbox (audit mode): chat and tool events committed in the same transaction
as the AgentState item they describe, forwarded to OTLP later by workers/trajectory_forwarder.
Its SQL lives in storage/outbox.py.

Rows name a session but hold no foreign key to it: the audit trail outlives the hot tables
(archived sessions leave them), and the forwarder must never block on session locks.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, Index, PrimaryKeyConstraint, Text, func, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from durable_agents.storage.models import Base


class TrajectoryOutboxRow(Base):
    __tablename__ = "trajectory_outbox"
    __table_args__ = (
        # Tenant-leading, like every tenant-owned table.
        PrimaryKeyConstraint("tenant_id", "event_id", name="trajectory_outbox_pkey"),
        # The forwarder's scan: oldest unsent first; sent rows drop out of the index.
        Index(
            "ix_trajectory_outbox_unsent",
            "created_at",
            postgresql_where=text("sent_at IS NULL"),
        ),
    )

    # Derived from the idempotency key of the item described: a retry writes the same id.
    event_id: Mapped[uuid.UUID] = mapped_column()
    tenant_id: Mapped[str] = mapped_column(Text)
    session_id: Mapped[uuid.UUID] = mapped_column()
    kind: Mapped[str] = mapped_column(Text)
    attributes: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
