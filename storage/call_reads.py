"""Read models of one tool call across its items (the call, an approver's decisions and
edits, its result), and of the calls a turn made before one."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.items import CallThread, ItemRepository
from durable_agents.storage.models import ItemRow
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.item_marks import CHECK_KEY, NUDGE_KEY


@dataclass(frozen=True)
class EffectiveCall:
    """What a tool call runs with: the approver's last edit of its arguments, else the
    model's, and the tool name the model used."""

    tool_name: str
    arguments: dict[str, Any]
    edited: bool


class CallReads:
    """Read models of one tool call across its items (the call, decisions, edits, result),
    and of the calls a turn made before one."""

    def __init__(self, db: AsyncSession, items: ItemRepository) -> None:
        self._db = db
        self._items = items

    async def thread(self, session_id: uuid.UUID, tool_call_id: str) -> CallThread | None:
        """The call's item and the other items committed for it, or None for no such call."""
        return await self._items.call_thread(session_id, tool_call_id)

    async def effective(self, session_id: uuid.UUID, tool_call_id: str) -> EffectiveCall | None:
        """The arguments the call runs with (an approver's edit wins), or None for no call."""
        thread = await self.thread(session_id, tool_call_id)
        return None if thread is None else effective_call(thread)

    async def before(self, session_id: uuid.UUID, ordinal: int, limit: int) -> list[CallThread]:
        """The threads of the last `limit` calls of the turn (since a person's latest
        message) made before the item at `ordinal`, in the order the model made them, newest
        first."""
        return await self._threads(session_id, await self._calls_before(session_id, ordinal, limit))

    async def _calls_before(self, session_id: uuid.UUID, ordinal: int, limit: int) -> list[ItemRow]:
        """The latest `limit` tool_call items of the session's turn before `ordinal` (those
        after the latest user message before it that is a person's, not the loop's own: a
        failed check, a nudge), newest first."""
        visible = await self._items.visible(session_id)
        turn = (
            select(func.max(ItemRow.ordinal))
            .where(
                visible,
                ItemRow.kind == ItemKind.USER_MESSAGE,
                ItemRow.ordinal < ordinal,
                ~ItemRow.data.has_key(CHECK_KEY),
                ~ItemRow.data.has_key(NUDGE_KEY),
            )
            .correlate(None)
            .scalar_subquery()
        )
        rows = await self._db.scalars(
            select(ItemRow)
            .where(
                visible,
                ItemRow.kind == ItemKind.TOOL_CALL,
                ItemRow.ordinal < ordinal,
                ItemRow.ordinal > func.coalesce(turn, -1),
            )
            .order_by(ItemRow.ordinal.desc())
            .limit(limit)
        )
        return list(rows)

    async def _threads(self, session_id: uuid.UUID, calls: Sequence[ItemRow]) -> list[CallThread]:
        """The threads of these tool_call items of the session (as call_thread builds one), in
        the order given, read in one statement."""
        ids = [row.tool_call_id for row in calls if row.tool_call_id]
        if not ids:
            return []
        rows = await self._db.scalars(
            select(ItemRow).where(
                await self._items.visible(session_id),
                ItemRow.tool_call_id.in_(ids),
                ItemRow.kind != ItemKind.TOOL_CALL,
            )
        )
        others: dict[str, list[ItemRow]] = {}
        for row in sorted(rows, key=lambda r: r.ordinal):
            others.setdefault(row.tool_call_id or "", []).append(row)
        return [
            CallThread(row, others.get(row.tool_call_id or "", []))
            for row in calls
            if row.tool_call_id
        ]


def effective_call(thread: CallThread) -> EffectiveCall:
    """What the call of ``thread`` runs with: an approver's last edit, else the model's."""
    edits = [r for r in thread.others if r.kind == ItemKind.APPROVAL and r.data.get("arguments")]
    source = edits[-1].data["arguments"] if edits else thread.call.data.get("arguments", {})
    return EffectiveCall(thread.call.tool_name or "", dict(source), bool(edits))
