"""Item repository: the append-only conversation of a session. Never commits."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, String, and_, bindparam, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.errors import SessionArchived
from durable_agents.storage.lineage import Lineage, load_lineage
from durable_agents.storage.models import ItemRow
from durable_agents.storage.sessions import SessionRepository
from durable_agents.storage.turns import TurnRepository
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import SessionStatus

# Ordinals are BIGINT: a cursor past this is not an ordinal.
MAX_ORDINAL = 2**63 - 1


_TENANT = bindparam("in_tenant", type_=String)
_KEY = bindparam("in_key", type_=String)
# The row of one idempotency key: what every append and every retried step looks up first.
# Built once and bound per call, like the session statements (storage/sessions.py); found
# through the unique index on item_key_hash(tenant_id, idempotency_key) as `_keyed` is.
_BY_KEY = select(ItemRow).where(
    func.item_key_hash(ItemRow.tenant_id, ItemRow.idempotency_key)
    == func.item_key_hash(_TENANT, _KEY),
    ItemRow.tenant_id == _TENANT,
    ItemRow.idempotency_key == _KEY,
)

# An item set aside (ItemRepository.set_aside) stays, under a key of this prefix, for the
# record; no read of a session's items sees it.
SET_ASIDE_PREFIX = "set-aside:"
_NOT_SET_ASIDE = ItemRow.idempotency_key.not_like(f"{SET_ASIDE_PREFIX}%")

# Every item of one tool call (each approval and each tool run reads them). No ORDER BY:
# with one, the planner may walk the session's (session, ordinal) index and filter on the
# call, reading every item of a long session; for_tool_call sorts the call's few rows.
_FOR_TOOL_CALL = select(ItemRow).where(
    ItemRow.session_id == bindparam("in_session"),
    ItemRow.tenant_id == _TENANT,
    ItemRow.tool_call_id == bindparam("in_call"),
    _NOT_SET_ASIDE,
)


@dataclass(frozen=True)
class NewItem:
    session_id: uuid.UUID
    kind: str  # an ItemKind
    role: str
    idempotency_key: str
    text: str = ""
    tool_call_id: str | None = None
    tool_name: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    artifact_id: uuid.UUID | None = None
    # Token estimate of `text`, kept so readers can choose a window without re-tokenising.
    tokens: int = 0


@dataclass(frozen=True)
class CallThread:
    """A tool call's item and the other items of the same call, in ordinal order."""

    call: ItemRow
    others: list[ItemRow]


class ItemRepository:
    """A session's items are its own and, for a fork, those it shares with the session it
    was forked from up to the fork point (storage/lineage.py): every read below goes through
    `visible`, the one place that knows it. Appends write the session's own items only."""

    def __init__(self, db: AsyncSession, tenant_id: str) -> None:
        self._db = db
        self._tenant = tenant_id
        self._sessions = SessionRepository(db, tenant_id)
        self._lineages: dict[uuid.UUID, Lineage] = {}

    async def lineage(self, session_id: uuid.UUID) -> Lineage:
        """The sessions whose items this session reads (itself alone unless it is a fork)."""
        known = self._lineages.get(session_id)
        if known is None:
            known = await load_lineage(self._db, self._tenant, session_id)
            self._lineages[session_id] = known
        return known

    async def visible(self, session_id: uuid.UUID) -> ColumnElement[bool]:
        """The session's items: this tenant's, of the session or the part of its lineage it
        shares, none set aside."""
        lineage = await self.lineage(session_id)
        return and_(
            ItemRow.tenant_id == self._tenant,
            lineage.visible(ItemRow.session_id, ItemRow.ordinal),
            _NOT_SET_ASIDE,
        )

    def _keyed(self, keys: Collection[str]) -> ColumnElement[bool]:
        """Rows of this tenant with one of these keys, found through the unique index on
        item_key_hash(tenant_id, idempotency_key). The tenant and the full
        key are compared as well, so a hash collision can never return another key's row."""
        hashed = func.item_key_hash(ItemRow.tenant_id, ItemRow.idempotency_key)
        return and_(
            hashed.in_([func.item_key_hash(self._tenant, k) for k in keys]),
            ItemRow.tenant_id == self._tenant,
            ItemRow.idempotency_key.in_(keys),
        )

    async def by_key(self, idempotency_key: str) -> ItemRow | None:
        return await self._db.scalar(
            _BY_KEY, {"in_tenant": self._tenant, "in_key": idempotency_key}
        )

    async def _by_keys(self, keys: Collection[str]) -> list[ItemRow]:
        if len(keys) == 1:
            row = await self.by_key(next(iter(keys)))
            return [] if row is None else [row]
        return list(await self._db.scalars(select(ItemRow).where(self._keyed(keys))))

    async def set_aside(self, row: ItemRow, why: str) -> None:
        """Take `row` out of its session, kept for the record (data "set_aside": `why`, our
        own words; "key": the key it had): a write its writer never came to know of, which
        the one it did know replaces under the same key in this unit of work."""
        row.data = {**row.data, "set_aside": why, "key": row.idempotency_key}
        row.idempotency_key = f"{SET_ASIDE_PREFIX}{row.id}"
        await self._db.flush()

    async def append(self, item: NewItem) -> tuple[ItemRow, bool]:
        """Append once per idempotency key. Returns (row, created).

        A retried write finds the row the first attempt committed and returns it, so no
        call, however often retried, duplicates a message.
        """
        return (await self.append_many([item]))[0]

    async def append_many(self, new: Sequence[NewItem]) -> list[tuple[ItemRow, bool]]:
        """Append items of one session in order, each once per idempotency key: what
        `append` does for each, with one lock, one lookup and one ordinal range."""
        if not new:
            return []
        session_id = new[0].session_id
        for item in new:
            if item.kind not in ItemKind.__members__.values():
                raise ValueError(f"unknown item kind {item.kind!r}")
            if item.session_id != session_id:
                raise ValueError("append_many appends to one session at a time")
        if await self._sessions.lock(session_id) == SessionStatus.ARCHIVED:
            # Its items live in a snapshot: appending here would fork the history.
            raise SessionArchived(f"session {session_id} is archived; rehydrate it first")
        # Look under the session lock, so a concurrent attempt has either committed (found
        # here) or waits; only then take ordinals, so a duplicate leaves next_ordinal alone.
        existing = {
            row.idempotency_key: row
            for row in await self._by_keys(sorted({i.idempotency_key for i in new}))
        }
        # A key repeated within the batch is appended once, like a retried single append.
        fresh: list[NewItem] = []
        for item in new:
            if item.idempotency_key not in existing and all(
                f.idempotency_key != item.idempotency_key for f in fresh
            ):
                fresh.append(item)
        turns = TurnRepository(self._db, self._tenant)
        ordinal, turn_id = 0, None
        if fresh:
            # A user message opens its own turn below; other items join the latest turn as
            # this statement began (under the session lock taken above, so no user message
            # can commit a newer one meanwhile).
            ordinal, turn_id = await self._sessions.take_ordinals(
                session_id, len(fresh), latest_turn=fresh[0].kind != ItemKind.USER_MESSAGE
            )
        created: dict[str, ItemRow] = {}
        for item in fresh:
            if item.kind == ItemKind.USER_MESSAGE:  # a user message opens a turn
                turn_id = (await turns.open(session_id, ordinal)).id
            created[item.idempotency_key] = ItemRow(
                id=uuid.uuid4(),
                tenant_id=self._tenant,
                session_id=session_id,
                ordinal=ordinal,
                kind=ItemKind(item.kind).value,
                role=item.role,
                text=item.text,
                tool_call_id=item.tool_call_id,
                tool_name=item.tool_name,
                data=item.data,
                idempotency_key=item.idempotency_key,
                artifact_id=item.artifact_id,
                turn_id=turn_id,
                # A rough estimate when the writer did not count: it only picks windows.
                tokens=item.tokens or (len(item.text) + 3) // 4,
            )
            ordinal += 1
        self._db.add_all(created.values())
        await self._db.flush()
        return [
            (created[i.idempotency_key], True)
            if i.idempotency_key in created
            else (existing[i.idempotency_key], False)
            for i in new
        ]

    async def page(
        self, session_id: uuid.UUID, *, after_ordinal: int = 0, limit: int | None = None
    ) -> list[ItemRow]:
        """Items of a session in ordinal order, starting after a cursor."""
        stmt = (
            select(ItemRow)
            .where(await self.visible(session_id), ItemRow.ordinal > after_ordinal)
            .order_by(ItemRow.ordinal)
        )
        if limit is not None:
            stmt = stmt.limit(limit)
        return list(await self._db.scalars(stmt))

    async def tool_call(self, session_id: uuid.UUID, tool_call_id: str) -> ItemRow | None:
        """The tool_call item of this call (the model's request: name and arguments)."""
        return await self._db.scalar(
            select(ItemRow)
            .where(
                await self.visible(session_id),
                ItemRow.tool_call_id == tool_call_id,
                ItemRow.kind == ItemKind.TOOL_CALL,
            )
            .order_by(ItemRow.ordinal)
            .limit(1)
        )

    async def call_thread(self, session_id: uuid.UUID, tool_call_id: str) -> CallThread | None:
        """The tool_call item of this call with the other items committed for it (approval
        decisions, edited arguments, its result), or None when the session has no such call."""
        rows = await self.for_tool_call(session_id, tool_call_id)
        call = next((r for r in rows if r.kind == ItemKind.TOOL_CALL), None)
        if call is None:
            return None
        return CallThread(call, [r for r in rows if r is not call])

    async def for_tool_call(self, session_id: uuid.UUID, tool_call_id: str) -> list[ItemRow]:
        """Every item of this call, in ordinal order (a handful: the call, its decisions and
        its result; ids are ours and unique within a session)."""
        if (await self.lineage(session_id)).forked:
            rows = await self._db.scalars(
                select(ItemRow).where(
                    await self.visible(session_id), ItemRow.tool_call_id == tool_call_id
                )
            )
        else:
            rows = await self._db.scalars(
                _FOR_TOOL_CALL,
                {"in_session": session_id, "in_tenant": self._tenant, "in_call": tool_call_id},
            )
        return sorted(rows, key=lambda row: row.ordinal)

    async def window(
        self,
        session_id: uuid.UUID,
        *,
        after_ordinal: int,
        token_budget: int,
        page: int = 200,
        starts: Collection[str] = (),
    ) -> list[ItemRow]:
        """The newest items after `after_ordinal` whose stored token counts fit the budget,
        in ordinal order. Reads newest-first pages, so the cost follows the window, not the
        length of the session. With `starts` (item kinds), the window reaches back, past the
        budget if it must, to an item of one of those kinds: it never begins inside a block
        (a tool result without the call that asked for it)."""
        picked: list[ItemRow] = []
        spent = 0
        before: int | None = None
        visible = await self.visible(session_id)
        while True:  # one page per turn; left by the `break`s below
            stmt = (
                select(ItemRow)
                .where(visible, ItemRow.ordinal > after_ordinal)
                .order_by(ItemRow.ordinal.desc())
                .limit(page)
            )
            if before is not None:
                stmt = stmt.where(ItemRow.ordinal < before)
            rows = list(await self._db.scalars(stmt))
            for row in rows:
                spent += row.tokens
                if spent > token_budget and picked and (not starts or picked[-1].kind in starts):
                    break
                picked.append(row)
            else:
                if len(rows) == page:
                    before = rows[-1].ordinal
                    continue
            break
        picked.reverse()
        return picked

    async def last_model_step(self, session_id: uuid.UUID) -> int | None:
        """The loop step of the session's newest committed model reply, if any."""
        row = await self._db.scalar(
            select(ItemRow)
            .where(await self.visible(session_id), ItemRow.kind == ItemKind.ASSISTANT_MESSAGE)
            .order_by(ItemRow.ordinal.desc())
            .limit(1)
        )
        return int(row.data["step"]) if row is not None and "step" in row.data else None

    async def get(self, session_id: uuid.UUID, item_id: uuid.UUID) -> ItemRow | None:
        """One item of the session by its id."""
        return await self._db.scalar(
            select(ItemRow).where(await self.visible(session_id), ItemRow.id == item_id)
        )

    async def count_marked(self, session_id: uuid.UUID, key: str, value: str) -> int:
        """How many of the session's items carry `value` under `key` in their data."""
        found = await self._db.scalar(
            select(func.count())
            .select_from(ItemRow)
            .where(await self.visible(session_id), ItemRow.data[key].astext == value)
        )
        return int(found or 0)

    async def calls_done(self, session_id: uuid.UUID, limit: int) -> list[ItemRow]:
        """The session's newest `limit` tool calls whose result is in and is no error (an
        `error_type` in its data), oldest first."""
        visible = await self.visible(session_id)
        results = select(ItemRow.tool_call_id).where(visible, ItemRow.kind == ItemKind.TOOL_RESULT)
        failed = results.where(ItemRow.data["error_type"].astext.is_not(None))
        rows = await self._db.scalars(
            select(ItemRow)
            .where(
                visible,
                ItemRow.kind == ItemKind.TOOL_CALL,
                ItemRow.tool_call_id.in_(results),
                ItemRow.tool_call_id.not_in(failed),
            )
            .order_by(ItemRow.ordinal.desc())
            .limit(limit)
        )
        return list(reversed(rows.all()))

    async def first_of_kind(
        self, session_id: uuid.UUID, kind: str, *, last: bool = False
    ) -> ItemRow | None:
        """The session's first item of `kind` (with `last`, its latest)."""
        return await self._db.scalar(
            select(ItemRow)
            .where(await self.visible(session_id), ItemRow.kind == kind)
            .order_by(ItemRow.ordinal.desc() if last else ItemRow.ordinal)
            .limit(1)
        )
