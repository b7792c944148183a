"""The effects ledger: one row per effectful tool call, per (tenant, idempotency key).

An effectful call is claimed (committed `started`) before it runs and settled in the
transaction that commits its result. A claim that finds the row already started means an
earlier attempt died between the two, so the effect may or may not have happened: the
caller must reconcile or report it in doubt, never run it again silently. All SQL on
`tool_effects`, scoped to one tenant. Never commits.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import ColumnElement, Table, and_, bindparam, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.models import ToolEffectRow


class EffectState(StrEnum):
    """Where an effectful call is (ck_tool_effects_state holds the same strings)."""

    STARTED = "started"  # claimed: an attempt may be acting right now, or died acting
    RETRYING = "retrying"  # released: the tool said its failure left no effect
    COMPLETED = "completed"
    FAILED = "failed"  # the tool's own verdict (a ToolError): no effect to reconcile
    RECONCILED = "reconciled"  # an interrupted attempt's effect, confirmed by reconcile
    IN_DOUBT = "in_doubt"  # it may or may not have acted; a person decides about a re-run


# What a call ends as, with its result.
SETTLED = (
    EffectState.COMPLETED,
    EffectState.FAILED,
    EffectState.RECONCILED,
    EffectState.IN_DOUBT,
)


# The claim and the settlement every effectful call makes, built once and run on the table
# (not through the ORM), as storage/sessions.py explains.
_EFFECTS: Table = ToolEffectRow.__table__  # type: ignore[assignment]
_CLAIM_NEW = (
    insert(_EFFECTS)
    .values(
        tenant_id=bindparam("in_tenant"),
        idempotency_key=bindparam("in_key"),
        session_id=bindparam("in_session"),
        tool_call_id=bindparam("in_call"),
        tool_name=bindparam("in_tool"),
        state=EffectState.STARTED.value,
        attempt=1,
    )
    .on_conflict_do_nothing(index_elements=[_EFFECTS.c.tenant_id, _EFFECTS.c.idempotency_key])
    .returning(_EFFECTS.c.attempt)
)
_SETTLE = (
    update(_EFFECTS)
    .where(
        _EFFECTS.c.tenant_id == bindparam("in_tenant"),
        _EFFECTS.c.idempotency_key == bindparam("in_key"),
        _EFFECTS.c.state == EffectState.STARTED.value,
    )
    .values(state=bindparam("to_state"), updated_at=func.now(), settled_at=func.now())
)


@dataclass(frozen=True)
class Claim:
    """The outcome of claiming a call: `fresh` means no earlier attempt may have acted."""

    fresh: bool
    # The row's state before this claim (None when this claim created it).
    found: str | None
    attempt: int


class ToolEffectRepository:
    def __init__(self, db: AsyncSession, tenant_id: str) -> None:
        self._db = db
        self._tenant = tenant_id

    async def claim(
        self, idempotency_key: str, *, session_id: uuid.UUID, tool_call_id: str, tool_name: str
    ) -> Claim:
        """Record that an attempt is about to run the call. Commit before running it.

        One statement when the key is new. Otherwise the row is locked and its attempt
        counted; it is fresh again only if the last attempt released it (`retrying`).
        A concurrent claim of a new key waits for the first one's commit and then finds
        it started: a second runner is never told it is first.
        """
        new = await self.claim_new(
            idempotency_key, session_id=session_id, tool_call_id=tool_call_id, tool_name=tool_name
        )
        if new is not None:
            return new
        return await self._claim_again(idempotency_key)

    async def claim_new(
        self, idempotency_key: str, *, session_id: uuid.UUID, tool_call_id: str, tool_name: str
    ) -> Claim | None:
        """`claim` when the key is new (one statement, so an autocommit unit suffices);
        None when a row exists already: then `claim` it in a transaction."""
        params = {
            "in_tenant": self._tenant,
            "in_key": idempotency_key,
            "in_session": session_id,
            "in_call": tool_call_id,
            "in_tool": tool_name,
        }
        if (await self._db.execute(_CLAIM_NEW, params)).scalar_one_or_none() is not None:
            return Claim(fresh=True, found=None, attempt=1)
        return None

    async def _claim_again(self, idempotency_key: str) -> Claim:
        found = await self._db.scalar(
            select(ToolEffectRow.state).where(self._key(idempotency_key)).with_for_update()
        )
        if found is None:  # only an operator deletes ledger rows: do not guess, retry later
            raise LookupError(f"effects ledger row {idempotency_key!r} vanished while claimed")
        attempt = (
            await self._db.execute(
                update(ToolEffectRow)
                .where(self._key(idempotency_key))
                .values(
                    attempt=ToolEffectRow.attempt + 1,
                    updated_at=func.now(),
                    state=EffectState.STARTED if found == EffectState.RETRYING else found,
                )
                .returning(ToolEffectRow.attempt)
            )
        ).scalar_one()
        return Claim(fresh=found == EffectState.RETRYING, found=found, attempt=attempt)

    async def settle(self, idempotency_key: str, state: EffectState) -> None:
        """Mark the call settled; in the transaction that commits its result. Only a
        started row settles: one another attempt settled first keeps what it says."""
        await self._db.execute(
            _SETTLE, {"in_tenant": self._tenant, "in_key": idempotency_key, "to_state": state}
        )

    async def release(self, idempotency_key: str) -> None:
        """The tool reported a failure that left no effect: the next attempt runs afresh."""
        await self._db.execute(
            update(ToolEffectRow)
            .where(self._key(idempotency_key), ToolEffectRow.state == EffectState.STARTED)
            .values(state=EffectState.RETRYING, updated_at=func.now())
        )

    async def get(self, idempotency_key: str) -> ToolEffectRow | None:
        return await self._db.scalar(select(ToolEffectRow).where(self._key(idempotency_key)))

    async def for_session(self, session_id: uuid.UUID) -> list[ToolEffectRow]:
        """The session's ledger rows, oldest first."""
        rows = await self._db.scalars(
            select(ToolEffectRow)
            .where(ToolEffectRow.tenant_id == self._tenant, ToolEffectRow.session_id == session_id)
            .order_by(ToolEffectRow.started_at, ToolEffectRow.idempotency_key)
        )
        return list(rows)

    def _key(self, idempotency_key: str) -> ColumnElement[bool]:
        return and_(
            ToolEffectRow.tenant_id == self._tenant,
            ToolEffectRow.idempotency_key == idempotency_key,
        )
