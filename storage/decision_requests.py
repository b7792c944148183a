"""Decision requests: what a person's approve, reject or budget raise says that must not
travel in workflow history (a reason, edited arguments), staged here until the loop accepts
the decision.

The client stages the request, sends the update with its id, and drops the request when the
update is refused: a refused decision leaves nothing. The loop's record of an accepted one
(activities/session_state.py) takes the request into its own item in the same transaction.
No reader lists requests; one a client left behind (it died between staging and sending)
is swept after STALE_AFTER.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import DateTime, Index, Text, delete, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from durable_agents.storage.models import Base

# Longer than any update's round trip, however busy the workers.
STALE_AFTER = timedelta(hours=1)


class DecisionRequestRow(Base):
    __tablename__ = "decision_requests"
    __table_args__ = (Index("ix_decision_requests_created", "created_at"),)

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    session_id: Mapped[uuid.UUID] = mapped_column()
    tool_call_id: Mapped[str | None] = mapped_column(Text)
    data: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class DecisionRequests:
    """One tenant's staged requests."""

    def __init__(self, db: AsyncSession, tenant_id: str) -> None:
        self._db = db
        self._tenant = tenant_id

    async def stage(
        self, session_id: uuid.UUID, tool_call_id: str | None, data: dict[str, Any]
    ) -> uuid.UUID:
        request_id = uuid.uuid4()
        self._db.add(
            DecisionRequestRow(
                tenant_id=self._tenant,
                id=request_id,
                session_id=session_id,
                tool_call_id=tool_call_id,
                data=data,
            )
        )
        await self._db.flush()
        return request_id

    async def take(
        self, request_id: uuid.UUID, session_id: uuid.UUID, tool_call_id: str | None
    ) -> dict[str, Any] | None:
        """The request's data and its row gone, if it is this session's (and call's)."""
        row = await self._db.scalar(
            delete(DecisionRequestRow)
            .where(
                DecisionRequestRow.tenant_id == self._tenant,
                DecisionRequestRow.id == request_id,
                DecisionRequestRow.session_id == session_id,
                DecisionRequestRow.tool_call_id.is_not_distinct_from(tool_call_id),
            )
            .returning(DecisionRequestRow.data)
        )
        return None if row is None else dict(row)

    async def drop(self, request_id: uuid.UUID) -> None:
        await self._db.execute(
            delete(DecisionRequestRow).where(
                DecisionRequestRow.tenant_id == self._tenant, DecisionRequestRow.id == request_id
            )
        )


async def sweep_stale_requests(db: AsyncSession, now: datetime) -> int:
    """Drop every tenant's requests staged before `now - STALE_AFTER`; how many."""
    stale = await db.scalars(
        delete(DecisionRequestRow)
        .where(DecisionRequestRow.created_at < now - STALE_AFTER)
        .returning(DecisionRequestRow.id)
    )
    return len(list(stale))
