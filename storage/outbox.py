"""OutboxRepository: the SQL of the trajectory outbox (audit mode).

Writers add events inside the unit of work that commits the item they describe; the
forwarder claims unsent rows and marks them sent in its own transaction. Like every
repository here it never commits: its caller's transaction does.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select, tuple_, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.outbox_models import TrajectoryOutboxRow


class OutboxRepository:
    def __init__(self, db: AsyncSession) -> None:
        self._db = db

    async def add(
        self,
        event_id: uuid.UUID,
        *,
        tenant_id: str,
        session_id: uuid.UUID,
        kind: str,
        attributes: dict[str, Any],
    ) -> None:
        """Write one event; a retry that writes the same event id again changes nothing."""
        await self._db.execute(
            insert(TrajectoryOutboxRow)
            .values(
                event_id=event_id,
                tenant_id=tenant_id,
                session_id=session_id,
                kind=kind,
                attributes=attributes,
            )
            .on_conflict_do_nothing(
                index_elements=[TrajectoryOutboxRow.tenant_id, TrajectoryOutboxRow.event_id]
            )
        )

    async def claim_unsent(self, limit: int) -> Sequence[TrajectoryOutboxRow]:
        """The oldest unsent events, locked until the transaction ends; rows another
        forwarder holds are skipped, so two forwarders never export the same batch at once."""
        return list(
            await self._db.scalars(
                select(TrajectoryOutboxRow)
                .where(TrajectoryOutboxRow.sent_at.is_(None))
                .order_by(TrajectoryOutboxRow.created_at, TrajectoryOutboxRow.event_id)
                .limit(limit)
                .with_for_update(skip_locked=True)
            )
        )

    async def mark_sent(self, events: Sequence[tuple[str, uuid.UUID]]) -> None:
        """`events`: (tenant id, event id) pairs, the table's key."""
        await self._db.execute(
            update(TrajectoryOutboxRow)
            .where(
                tuple_(TrajectoryOutboxRow.tenant_id, TrajectoryOutboxRow.event_id).in_(
                    list(events)
                )
            )
            .values(sent_at=func.now())
        )
