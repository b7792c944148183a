"""Model usage: what each reply cost, recorded once under its idempotency key, and the sums
read per session, agent, tenant and day. All SQL on `model_usage`, scoped to one tenant.
Never commits: a reply's usage commits in the unit of work that commits the reply."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Table, bindparam, case, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.quotas import TenantControls
from durable_agents.storage.usage_models import ModelUsageRow, SessionSpendRow

_USAGE: Table = ModelUsageRow.__table__  # type: ignore[assignment]
# Built once, bound per reply (see storage/sessions.py): every model step runs it.
_RECORD = (
    insert(_USAGE)
    .values(
        tenant_id=bindparam("in_tenant"),
        idempotency_key=bindparam("in_key"),
        session_id=bindparam("in_session"),
        agent=bindparam("in_agent"),
        provider=bindparam("in_provider"),
        model=bindparam("in_model"),
        purpose=bindparam("in_purpose"),
        input_tokens=bindparam("in_input"),
        output_tokens=bindparam("in_output"),
        cached_tokens=bindparam("in_cached"),
        tool_calls=bindparam("in_calls"),
        cost_usd=bindparam("in_cost"),
        day=bindparam("in_day"),
    )
    # The key was counted: a retry or a replay of the same reply adds nothing.
    .on_conflict_do_nothing(index_elements=[_USAGE.c.tenant_id, _USAGE.c.idempotency_key])
)

# Figures no reply comes near; a provider reporting more is refused rather than stored.
MAX_TOKENS = 2**40


@dataclass(frozen=True)
class UsageRecord:
    """One reply's usage as its provider reported it."""

    idempotency_key: str
    session_id: uuid.UUID
    agent: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    cost_usd: Decimal | None = None
    purpose: str = "chat"
    # The tool calls the reply asked for (reported; a budget counts those admitted).
    tool_calls: int = 0
    # A sub-agent's reply counts against its root task's budget too: that session's sums
    # grow with it (None: the session is its own budget's).
    budget_session_id: uuid.UUID | None = None


@dataclass(frozen=True)
class UsageFilter:
    """Which replies to sum; None: any. `since` and `day` are UTC days."""

    session_id: uuid.UUID | None = None
    agent: str | None = None
    day: date | None = None
    since: date | None = None


@dataclass(frozen=True)
class UsageSum:
    """Sums over a group of replies. `cost_usd` is None when any of them was unpriced:
    a partial sum would read as the whole bill."""

    replies: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cost_usd: Decimal | None
    unpriced_replies: int
    day: date | None = None
    agent: str | None = None
    provider: str | None = None
    model: str | None = None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


GROUPS = ("day", "agent", "model")

_SPENT: Table = SessionSpendRow.__table__  # type: ignore[assignment]
_NEW_SPEND = insert(_SPENT).values(
    tenant_id=bindparam("in_tenant"),
    session_id=bindparam("in_session"),
    tokens=bindparam("in_tokens"),
    cost_usd=bindparam("in_cost"),
    unpriced_replies=bindparam("in_unpriced"),
)
# Grown only by a reply whose usage row was just inserted: counted once, as model_usage.
_GROW_SPEND = _NEW_SPEND.on_conflict_do_update(
    index_elements=[_SPENT.c.tenant_id, _SPENT.c.session_id],
    set_={
        "tokens": _SPENT.c.tokens + _NEW_SPEND.excluded.tokens,
        "cost_usd": _SPENT.c.cost_usd + _NEW_SPEND.excluded.cost_usd,
        "unpriced_replies": _SPENT.c.unpriced_replies + _NEW_SPEND.excluded.unpriced_replies,
    },
)
# What a budget check reads before every model step: one primary-key row.
_SPEND = select(
    _SPENT.c.tokens, _SPENT.c.cost_usd, _SPENT.c.unpriced_replies, _SPENT.c.tool_calls
).where(
    _SPENT.c.tenant_id == bindparam("in_tenant"), _SPENT.c.session_id == bindparam("in_session")
)


@dataclass(frozen=True)
class SessionSpend:
    """What one session has spent, as committed. `cost_usd` None: some reply unpriced."""

    tokens: int
    cost_usd: Decimal | None
    tool_calls: int


class UsageRepository:
    def __init__(self, db: AsyncSession, tenant_id: str) -> None:
        self._db = db
        self._tenant = tenant_id

    async def record(self, usage: UsageRecord, *, day: date | None = None) -> bool:
        """Count a reply's usage once; False when its key was already counted."""
        day = day or datetime.now(UTC).date()
        figures = (usage.input_tokens, usage.output_tokens, usage.cached_tokens, usage.tool_calls)
        if any(n < 0 or n > MAX_TOKENS for n in figures):
            raise ValueError(f"usage: token counts must be 0..{MAX_TOKENS}")
        result: Any = await self._db.execute(
            _RECORD,
            {
                "in_tenant": self._tenant,
                "in_key": usage.idempotency_key,
                "in_session": usage.session_id,
                "in_agent": usage.agent,
                "in_provider": usage.provider,
                "in_model": usage.model,
                "in_purpose": usage.purpose,
                "in_input": usage.input_tokens,
                "in_output": usage.output_tokens,
                "in_cached": min(usage.cached_tokens, usage.input_tokens),
                "in_calls": usage.tool_calls,
                "in_cost": usage.cost_usd,
                "in_day": day,
            },
        )
        if not result.rowcount:
            return False
        tokens = usage.input_tokens + usage.output_tokens
        # Row locks in one order (the session, its root, the tenant's day): no deadlock.
        spenders = [usage.session_id]
        root = usage.budget_session_id
        if root is not None and root != usage.session_id:
            spenders.append(root)
        for session_id in spenders:
            await self._db.execute(
                _GROW_SPEND,
                {
                    "in_tenant": self._tenant,
                    "in_session": session_id,
                    "in_tokens": tokens,
                    "in_cost": usage.cost_usd or 0,
                    "in_unpriced": int(usage.cost_usd is None),
                },
            )
        await TenantControls(self._db, self._tenant).grow(day, tokens, usage.cost_usd)
        return True

    async def session_spend(self, session_id: uuid.UUID) -> SessionSpend:
        """Tokens and cost the session committed and the tool calls admitted under it (a
        budget's figures)."""
        row = (
            await self._db.execute(_SPEND, {"in_tenant": self._tenant, "in_session": session_id})
        ).one_or_none()
        if row is None:
            return SessionSpend(tokens=0, cost_usd=Decimal(0), tool_calls=0)
        tokens, cost, unpriced, calls = row
        return SessionSpend(
            tokens=int(tokens),
            cost_usd=None if unpriced else Decimal(cost or 0),
            tool_calls=int(calls),
        )

    async def reply_costs(self, keys: Collection[str]) -> dict[str, Decimal | None]:
        """The cost of each counted reply among `keys` (replies' idempotency keys), by key:
        None for a reply its model had no price for; a key never counted is left out."""
        if not keys:
            return {}
        rows = await self._db.execute(
            select(_USAGE.c.idempotency_key, _USAGE.c.cost_usd).where(
                _USAGE.c.tenant_id == self._tenant, _USAGE.c.idempotency_key.in_(list(keys))
            )
        )
        return {key: None if cost is None else Decimal(cost) for key, cost in rows}

    async def total(self, where: UsageFilter = UsageFilter()) -> UsageSum:
        """The tenant's usage matching `where`, summed."""
        rows = await self.grouped(where, by=())
        return rows[0]

    async def grouped(
        self, where: UsageFilter = UsageFilter(), *, by: tuple[str, ...] = GROUPS
    ) -> list[UsageSum]:
        """Sums per group of `by` (day, agent, model: model means provider and model),
        ordered by day then name. With no `by`, one row (zeros when nothing matched)."""
        unknown = set(by) - set(GROUPS)
        if unknown:
            raise ValueError(f"usage: cannot group by {sorted(unknown)}")
        keys = []
        if "day" in by:
            keys.append(_USAGE.c.day)
        if "agent" in by:
            keys.append(_USAGE.c.agent)
        if "model" in by:
            keys += [_USAGE.c.provider, _USAGE.c.model]
        unpriced = func.count() - func.count(_USAGE.c.cost_usd)
        query = select(
            *keys,
            func.count(),
            func.coalesce(func.sum(_USAGE.c.input_tokens), 0),
            func.coalesce(func.sum(_USAGE.c.output_tokens), 0),
            func.coalesce(func.sum(_USAGE.c.cached_tokens), 0),
            case((unpriced == 0, func.coalesce(func.sum(_USAGE.c.cost_usd), 0))),
            unpriced,
        ).where(_USAGE.c.tenant_id == self._tenant)
        if where.session_id is not None:
            query = query.where(_USAGE.c.session_id == where.session_id)
        if where.agent is not None:
            query = query.where(_USAGE.c.agent == where.agent)
        if where.day is not None:
            query = query.where(_USAGE.c.day == where.day)
        if where.since is not None:
            query = query.where(_USAGE.c.day >= where.since)
        if keys:
            query = query.group_by(*keys).order_by(*keys)
        out = []
        for row in (await self._db.execute(query)).all():
            named = dict(zip([k.name for k in keys], row[: len(keys)], strict=True))
            replies, inp, outp, cached, cost, unpriced_n = row[len(keys) :]
            out.append(
                UsageSum(
                    replies=int(replies),
                    input_tokens=int(inp),
                    output_tokens=int(outp),
                    cached_tokens=int(cached),
                    cost_usd=None if cost is None else Decimal(cost),
                    unpriced_replies=int(unpriced_n),
                    **named,
                )
            )
        return out
