"""Turn repository: a turn groups the items of one user request. Never commits."""

from __future__ import annotations

import uuid

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.models import TurnRow

# A session's latest turn, bound by `in_session` and `in_tenant`: built once
# (storage/sessions.py explains why).
_LATEST = (
    select(TurnRow)
    .where(
        TurnRow.session_id == bindparam("in_session"),
        TurnRow.tenant_id == bindparam("in_tenant"),
    )
    .order_by(TurnRow.turn_no.desc())
    .limit(1)
)
# Its id (None: the session has no turn), as a subquery of the statement that binds it.
LATEST_TURN_ID = _LATEST.with_only_columns(TurnRow.id).scalar_subquery()


class TurnRepository:
    def __init__(self, db: AsyncSession, tenant_id: str) -> None:
        self._db = db
        self._tenant = tenant_id

    async def open(self, session_id: uuid.UUID, first_ordinal: int) -> TurnRow:
        """Start the next turn at `first_ordinal`. Callers hold the session lock."""
        last = await self._db.scalar(
            select(func.max(TurnRow.turn_no)).where(
                TurnRow.session_id == session_id, TurnRow.tenant_id == self._tenant
            )
        )
        row = TurnRow(
            id=uuid.uuid4(),
            tenant_id=self._tenant,
            session_id=session_id,
            turn_no=int(last or 0) + 1,
            first_ordinal=first_ordinal,
        )
        self._db.add(row)
        await self._db.flush()
        return row

    async def get(self, turn_id: uuid.UUID) -> TurnRow | None:
        return await self._db.scalar(
            select(TurnRow).where(TurnRow.id == turn_id, TurnRow.tenant_id == self._tenant)
        )

    async def latest(self, session_id: uuid.UUID) -> TurnRow | None:
        row: TurnRow | None = await self._db.scalar(
            _LATEST, {"in_session": session_id, "in_tenant": self._tenant}
        )
        return row

    async def for_session(self, session_id: uuid.UUID) -> list[TurnRow]:
        rows = await self._db.scalars(
            select(TurnRow)
            .where(TurnRow.session_id == session_id, TurnRow.tenant_id == self._tenant)
            .order_by(TurnRow.turn_no)
        )
        return list(rows)

    async def set_config(self, turn_id: uuid.UUID, config_id: uuid.UUID) -> uuid.UUID:
        """Record the turn's context config once; returns the config the turn keeps."""
        # One statement: a turn that has a config keeps it (a concurrent first step that
        # committed first wins, as the row lock makes this re-read its config).
        kept = await self._db.scalar(
            update(TurnRow)
            .where(TurnRow.id == turn_id, TurnRow.tenant_id == self._tenant)
            .values(context_config_id=func.coalesce(TurnRow.context_config_id, config_id))
            .returning(TurnRow.context_config_id)
        )
        return kept or config_id
