"""Compaction repository: versioned summaries of a session up to an ordinal. Never commits.

Raw items are never deleted; a compaction only changes where context assembly starts.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.lineage import Lineage, load_lineage
from durable_agents.storage.models import CompactionRow
from durable_agents.storage.sessions import SessionRepository

# The summary context assembly starts from, read every model step: built once.
_LATEST = (
    select(CompactionRow)
    .where(
        CompactionRow.session_id == bindparam("in_session"),
        CompactionRow.tenant_id == bindparam("in_tenant"),
    )
    .order_by(CompactionRow.version.desc())
    .limit(1)
)


class CompactionRepository:
    def __init__(
        self,
        db: AsyncSession,
        tenant_id: str,
        lineage: Callable[[uuid.UUID], Awaitable[Lineage]] | None = None,
    ) -> None:
        """`lineage`: where the session's lineage is read (the unit of work's item
        repository keeps it); by default, from the database."""
        self._db = db
        self._tenant = tenant_id
        self._lineage = lineage or (lambda sid: load_lineage(db, tenant_id, sid))

    async def latest(self, session_id: uuid.UUID) -> CompactionRow | None:
        """The summary context assembly starts from. A fork's, before it has one of its own,
        is the latest its parent made of the items it shares: one that covers no further
        than the fork point."""
        lineage = await self._lineage(session_id)
        if not lineage.forked:
            row: CompactionRow | None = await self._db.scalar(
                _LATEST, {"in_session": session_id, "in_tenant": self._tenant}
            )
            return row
        visible = lineage.visible(CompactionRow.session_id, CompactionRow.covers_through_ordinal)
        return await self._db.scalar(
            select(CompactionRow)
            .where(CompactionRow.tenant_id == self._tenant, visible)
            .order_by(CompactionRow.covers_through_ordinal.desc())
            .limit(1)
        )

    async def by_key(self, idempotency_key: str) -> CompactionRow | None:
        return await self._db.scalar(
            select(CompactionRow).where(
                CompactionRow.idempotency_key == idempotency_key,
                CompactionRow.tenant_id == self._tenant,
            )
        )

    async def for_session(self, session_id: uuid.UUID) -> list[CompactionRow]:
        rows = await self._db.scalars(
            select(CompactionRow)
            .where(CompactionRow.session_id == session_id, CompactionRow.tenant_id == self._tenant)
            .order_by(CompactionRow.version)
        )
        return list(rows)

    async def add(
        self,
        session_id: uuid.UUID,
        *,
        covers_through_ordinal: int,
        summary: str,
        summary_tokens: int,
        model: str,
        idempotency_key: str,
    ) -> tuple[CompactionRow, bool]:
        """Store the next version once per idempotency key. Returns (row, created)."""
        existing = await self.by_key(idempotency_key)
        if existing is not None:
            return existing, False
        await SessionRepository(self._db, self._tenant).lock(session_id)
        existing = await self.by_key(idempotency_key)
        if existing is not None:
            return existing, False
        previous = await self.latest(session_id)
        if previous is not None and covers_through_ordinal <= previous.covers_through_ordinal:
            raise ValueError(
                f"compaction must move forward: {covers_through_ordinal} <= "
                f"{previous.covers_through_ordinal}"
            )
        row = CompactionRow(
            id=uuid.uuid4(),
            tenant_id=self._tenant,
            session_id=session_id,
            version=(previous.version + 1) if previous else 1,
            previous_compaction_id=previous.id if previous else None,
            covers_through_ordinal=covers_through_ordinal,
            summary=summary,
            summary_tokens=summary_tokens,
            model=model,
            idempotency_key=idempotency_key,
        )
        self._db.add(row)
        await self._db.flush()
        return row, True
