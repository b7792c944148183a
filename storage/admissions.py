"""The admissions ledger: every model call, tool call and sub-agent that passed the gate
(activities/policies/admission.py), once per idempotency key, with a model call's reservation.

An admission is decided and recorded in one transaction holding its budget's lock (one
advisory lock per tenant and budget session), so two calls of one task tree, run at once by
any workers, are admitted one after the other against what the other took:
- a tool call or a sub-agent grows its counter (session_spend.tool_calls, .sub_agents) on
  the session and on its budget's root, so a budget of N tool calls admits exactly N;
- a model call holds a reservation (its largest possible usage and that usage's price)
  while it runs: the budget counts reserved and committed spend together, so a tree of
  calls in flight cannot all start under a budget that one of them would use up.

A reservation ends when the reply is counted (in the reply's transaction) or the call
fails; one whose worker died stops counting after RESERVATION_TTL, or is renewed by the
retried attempt, which finds its key admitted.
"""

from __future__ import annotations

import uuid
import zlib
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from sqlalchemy import bindparam, func, literal, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import Executable
from sqlalchemy.sql.schema import Table

from durable_agents.storage.usage_models import AdmissionRow, SessionSpendRow

MODEL, TOOL, SUB_AGENT = "model", "tool", "sub_agent"
ADMISSION_KINDS = (MODEL, TOOL, SUB_AGENT)
# Twice the longest model call attempt (workflows/policies.py MODEL_CALL_TIMEOUT).
RESERVATION_TTL = timedelta(minutes=10)

_SPENT: Table = SessionSpendRow.__table__  # type: ignore[assignment]
_COUNTERS = {TOOL: "tool_calls", SUB_AGENT: "sub_agents"}


@dataclass(frozen=True)
class Reservation:
    """What a model call may use at most: its context budget plus its reply's max_tokens,
    and their price (None: the model is unpriced)."""

    tokens: int
    cost_usd: Decimal | None


def _grow(counter: str) -> Executable:
    new = insert(_SPENT).values(
        tenant_id=bindparam("in_tenant"), session_id=bindparam("in_session"), **{counter: 1}
    )
    return new.on_conflict_do_update(
        index_elements=[_SPENT.c.tenant_id, _SPENT.c.session_id],
        set_={counter: _SPENT.c[counter] + 1},
    )


_GROW = {kind: _grow(column) for kind, column in _COUNTERS.items()}


class AdmissionRepository:
    """One tenant's admissions. Every method runs inside the caller's transaction."""

    def __init__(self, db: AsyncSession, tenant_id: str) -> None:
        self._db = db
        self._tenant = tenant_id

    async def lock(self, budget_session_id: uuid.UUID) -> None:
        """Serialize admissions against one budget until this transaction ends."""
        key = zlib.crc32(f"admit:{self._tenant}:{budget_session_id}".encode()) - 2**31
        await self._db.execute(select(func.pg_advisory_xact_lock(literal(key))))

    async def admit(
        self,
        idempotency_key: str,
        kind: str,
        *,
        session_id: uuid.UUID,
        budget_session_id: uuid.UUID,
        reservation: Reservation | None = None,
    ) -> None:
        """Record the admission; a tool call or sub-agent is counted on its session and on
        its budget's root, a model call holds `reservation` until settled."""
        if kind not in ADMISSION_KINDS:
            raise ValueError(f"admission kind must be one of {', '.join(ADMISSION_KINDS)}")
        held = reservation or Reservation(0, Decimal(0))
        self._db.add(
            AdmissionRow(
                tenant_id=self._tenant,
                idempotency_key=idempotency_key,
                budget_session_id=budget_session_id,
                session_id=session_id,
                kind=kind,
                reserved_tokens=held.tokens,
                reserved_cost_usd=held.cost_usd,
                open=reservation is not None,
            )
        )
        await self._db.flush()
        grow = _GROW.get(kind)
        if grow is None:
            return
        # Row locks in one order (the session, then its root), as usage.record takes them.
        for counted in dict.fromkeys((session_id, budget_session_id)):
            await self._db.execute(grow, {"in_tenant": self._tenant, "in_session": counted})

    async def renew(self, idempotency_key: str) -> None:
        """A retried model call: its reservation counts again, from now."""
        await self._set_open(idempotency_key, True)

    async def settle(self, idempotency_key: str) -> None:
        """The reservation ends: its reply was counted, or the call failed."""
        await self._set_open(idempotency_key, False)

    async def _set_open(self, idempotency_key: str, is_open: bool) -> None:
        await self._db.execute(
            update(AdmissionRow)
            .where(
                AdmissionRow.tenant_id == self._tenant,
                AdmissionRow.idempotency_key == idempotency_key,
                AdmissionRow.kind == MODEL,
            )
            .values(open=is_open, renewed_at=func.now())
        )
