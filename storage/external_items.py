"""The items of a session another SDK keeps in AgentState (its conversation store): the
newest of them, and removing them again, which that SDK's session protocol asks for (undo
the last item, clear the conversation). Our own loop never removes an item. Never commits.

A removed item's artifact stays required while another item of the session still names
it; otherwise its checkpoint ref expires now and GC collects the object after its window.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import Table, delete, exists, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.artifact_records import ArtifactRepository
from durable_agents.storage.errors import SessionShared
from durable_agents.storage.models import ArtifactRefRow, ItemRow, TurnRow
from durable_agents.storage.sessions import SessionRepository

_REFS: Table = ArtifactRefRow.__table__  # type: ignore[assignment]

# How the agent definition of a session another SDK keeps begins ("external:openai-agents"):
# such a session is a conversation, not a task of ours (quotas do not count it). No agent
# of ours can be so named (activities/agents.py: letters, digits, '_' and '-').
EXTERNAL_PREFIX = "external:"


class ExternalItems:
    """Reads and removals on one tenant's session items."""

    def __init__(self, db: AsyncSession, tenant_id: str) -> None:
        self._db = db
        self._tenant = tenant_id

    async def _lock_unshared(self, session_id: uuid.UUID) -> None:
        """Lock the session for a removal; SessionShared when a fork shares its items (a
        fork being created waits for the lock, or holds the row first and is seen here)."""
        sessions = SessionRepository(self._db, self._tenant)
        await sessions.lock(session_id)
        if await sessions.forks(session_id):
            raise SessionShared(f"session {session_id} has forks that share its items")

    async def newest(self, session_id: uuid.UUID, limit: int) -> list[ItemRow]:
        """The session's newest `limit` items, in ordinal order."""
        rows = await self._db.scalars(
            select(ItemRow)
            .where(ItemRow.session_id == session_id, ItemRow.tenant_id == self._tenant)
            .order_by(ItemRow.ordinal.desc())
            .limit(limit)
        )
        return list(reversed(list(rows)))

    async def remove_last(self, session_id: uuid.UUID) -> ItemRow | None:
        """Remove the session's newest item and return it (None: the session has none).
        Takes the session's lock, so it is ordered with appends."""
        await self._lock_unshared(session_id)
        newest = await self.newest(session_id, 1)
        if not newest:
            return None
        row = newest[0]
        await self._db.execute(
            delete(ItemRow).where(ItemRow.tenant_id == self._tenant, ItemRow.id == row.id)
        )
        if row.turn_id is not None:
            # A turn whose items are all gone (its user message was the one removed) goes too:
            # the next item would otherwise join a turn that begins at a missing ordinal.
            await self._db.execute(
                delete(TurnRow).where(
                    TurnRow.tenant_id == self._tenant,
                    TurnRow.id == row.turn_id,
                    ~exists().where(
                        ItemRow.tenant_id == self._tenant, ItemRow.turn_id == row.turn_id
                    ),
                )
            )
        if row.artifact_id is not None:
            await self._release_unnamed(session_id, [row.artifact_id])
        return row

    async def remove_all(self, session_id: uuid.UUID) -> int:
        """Remove every item and turn of the session; how many items went. The session row
        stays (its id, tenant and title), so later appends continue it."""
        await self._lock_unshared(session_id)
        gone = await self._db.execute(
            delete(ItemRow)
            .where(ItemRow.session_id == session_id, ItemRow.tenant_id == self._tenant)
            .returning(ItemRow.artifact_id)
        )
        removed = gone.all()
        named = {a for (a,) in removed if a is not None}
        await self._db.execute(
            delete(TurnRow).where(
                TurnRow.session_id == session_id, TurnRow.tenant_id == self._tenant
            )
        )
        await self._release_unnamed(session_id, sorted(named))
        return len(removed)

    async def hold(self, session_id: uuid.UUID, artifact_id: uuid.UUID) -> None:
        """The session needs the artifact to resume (an item of it names the object): its
        checkpoint ref, required again if a removal had released it. A plain add_ref keeps
        a released ref as it was, and GC would then take an object an item names."""
        await self._db.execute(
            insert(ArtifactRefRow)
            .values(
                tenant_id=self._tenant,
                owner_type="checkpoint",
                owner_id=str(session_id),
                artifact_id=artifact_id,
                required_for_resume=True,
                expires_at=None,
            )
            .on_conflict_do_update(
                index_elements=[c.name for c in _REFS.primary_key],
                set_={"required_for_resume": True, "expires_at": None},
            )
        )

    async def _release_unnamed(self, session_id: uuid.UUID, artifact_ids: list[uuid.UUID]) -> None:
        if not artifact_ids:
            return
        still = set(
            await self._db.scalars(
                select(ItemRow.artifact_id).where(
                    ItemRow.session_id == session_id,
                    ItemRow.tenant_id == self._tenant,
                    ItemRow.artifact_id.in_(artifact_ids),
                )
            )
        )
        refs = ArtifactRepository(self._db, self._tenant)
        now = datetime.now(UTC)
        for artifact_id in artifact_ids:
            if artifact_id not in still:
                await refs.release_ref(
                    artifact_id,
                    owner_type="checkpoint",
                    owner_id=str(session_id),
                    expires_at=now,
                )
