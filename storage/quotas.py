"""A tenant's quotas and kill switch (tenant_controls) and its spend by UTC day
(tenant_spend). All SQL on them, scoped to one tenant; never commits.

Quotas: tokens and cost per UTC day and per UTC month (checked before every model step
against committed spend), running tasks, parked tasks and starts per minute (checked when
a task starts). A figure the table holds replaces the settings' default for the tenant; a
figure neither sets is unlimited. Frozen: no model step runs and no task starts until thaw.
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, TypeVar

from pydantic import ValidationError
from sqlalchemy import Table, bindparam, exists, func, literal, or_, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.admissions import RESERVATION_TTL
from durable_agents.storage.device_models import DeviceRow
from durable_agents.storage.errors import StorageError, TenantNotFound
from durable_agents.storage.external_items import EXTERNAL_PREFIX
from durable_agents.storage.models import ApiKeyRow, SessionRow
from durable_agents.storage.quota_figures import SPEND_QUOTAS as SPEND_QUOTAS
from durable_agents.storage.quota_figures import START_QUOTAS as START_QUOTAS
from durable_agents.storage.quota_figures import Quotas as Quotas
from durable_agents.storage.quota_models import TenantControlRow, TenantSpendRow
from durable_agents.storage.step_figures import STEP_FIGURES, Spent, StepFigures
from durable_agents.vocabulary.session_status import SessionStatus

QUOTA_NAMES = SPEND_QUOTAS + START_QUOTAS

# A task counts as running while the loop may call a model or a tool for it, and as parked
# while it waits for a person (an approval, a raise, a quota, a thaw) to go on.
RUNNING_STATUSES = (
    SessionStatus.CREATED,
    SessionStatus.RUNNING,
    SessionStatus.WAITING_DEVICE,
    SessionStatus.WAITING_MODEL,
)
PARKED_STATUSES = (
    SessionStatus.WAITING_APPROVAL,
    SessionStatus.BUDGET_EXHAUSTED,
    SessionStatus.QUOTA_EXHAUSTED,
    SessionStatus.FROZEN,
)


T = TypeVar("T")


class QuotaRefused(StorageError):
    """A start the tenant's quotas do not allow; nothing was committed."""

    error_type = "QuotaRefused"


class TenantFrozen(QuotaRefused):
    """The tenant is frozen: no start, no model step, no device call until thaw."""

    error_type = "TenantFrozen"

    def __init__(self, tenant_id: str) -> None:
        super().__init__(
            f"tenant {tenant_id!r} is frozen: nothing starts or runs until an operator thaws it"
        )


def tenant_default(table: Mapping[str, T], tenant_id: str) -> T | None:
    """The deployment's default for `tenant_id` in a table by tenant ("*": any other)."""
    return table.get(tenant_id) or table.get("*")


def month_start(day: date) -> date:
    return day.replace(day=1)


def next_period(day: date, monthly: bool) -> date:
    """The first UTC day after `day`'s day (or month): when a quota of it resets."""
    if not monthly:
        return day + timedelta(days=1)
    return (day.replace(day=28) + timedelta(days=4)).replace(day=1)


_CONTROLS: Table = TenantControlRow.__table__  # type: ignore[assignment]
_DAYS: Table = TenantSpendRow.__table__  # type: ignore[assignment]

_NEW_DAY = insert(_DAYS).values(
    tenant_id=bindparam("in_tenant"),
    day=bindparam("in_day"),
    tokens=bindparam("in_tokens"),
    cost_usd=bindparam("in_cost"),
    unpriced_replies=bindparam("in_unpriced"),
)
GROW_DAY = _NEW_DAY.on_conflict_do_update(
    index_elements=[_DAYS.c.tenant_id, _DAYS.c.day],
    set_={
        "tokens": _DAYS.c.tokens + _NEW_DAY.excluded.tokens,
        "cost_usd": _DAYS.c.cost_usd + _NEW_DAY.excluded.cost_usd,
        "unpriced_replies": _DAYS.c.unpriced_replies + _NEW_DAY.excluded.unpriced_replies,
    },
)


def _spent(tokens: Any, cost: Any, unpriced: Any) -> Spent:
    return Spent(int(tokens or 0), None if unpriced else Decimal(cost or 0))


def _figure(value: Any) -> Any:
    return float(value) if isinstance(value, Decimal) else value


class TenantControls:
    """One tenant's quotas, kill switch and spend by day."""

    def __init__(self, db: AsyncSession, tenant_id: str) -> None:
        self._db = db
        self._tenant = tenant_id

    async def step_figures(
        self,
        session_id: uuid.UUID,
        *,
        budget_session: uuid.UUID | None = None,
        day: date,
        admission_key: str | None = None,
    ) -> StepFigures:
        """What an admission for `session_id` is checked against on `day`; its budget
        counts the spend of `budget_session` (a sub-agent's: its root task's) if given;
        `admitted` says whether an admission under `admission_key` is recorded."""
        row = (
            await self._db.execute(
                STEP_FIGURES,
                {
                    "tenant": self._tenant,
                    "session": budget_session or session_id,
                    "day": day,
                    "month": month_start(day),
                    "ttl": RESERVATION_TTL.total_seconds(),
                    "key": admission_key,
                },
            )
        ).one()
        s_tokens, s_cost, s_unpriced, s_calls, tpd, cpd, tpm, cpm, frozen = row[:9]
        s_agents, r_tokens, r_cost, r_unpriced = row[15:19]
        return StepFigures(
            session_tokens=int(s_tokens or 0),
            session_cost_usd=None if s_unpriced else Decimal(s_cost or 0),
            session_tool_calls=int(s_calls or 0),
            quotas=Quotas(
                tokens_per_day=tpd,
                cost_usd_per_day=_figure(cpd),
                tokens_per_month=tpm,
                cost_usd_per_month=_figure(cpm),
            ),
            frozen=bool(frozen),
            day=_spent(*row[9:12]),
            month=_spent(*row[12:15]),
            session_sub_agents=int(s_agents or 0),
            reserved_tokens=int(r_tokens or 0),
            reserved_cost_usd=None if r_unpriced else Decimal(r_cost or 0),
            admitted=bool(row[19]),
        )

    async def spent(self, since: date, until: date) -> Spent:
        """The tenant's committed spend over UTC days since..until (inclusive)."""
        row = (
            await self._db.execute(
                select(
                    func.sum(_DAYS.c.tokens),
                    func.sum(_DAYS.c.cost_usd),
                    func.sum(_DAYS.c.unpriced_replies),
                ).where(
                    _DAYS.c.tenant_id == self._tenant, _DAYS.c.day >= since, _DAYS.c.day <= until
                )
            )
        ).one()
        return _spent(*row)

    async def grow(self, day: date, tokens: int, cost_usd: Decimal | None) -> None:
        """Add one counted reply to the tenant's day (in the reply's transaction)."""
        await self._db.execute(
            GROW_DAY,
            {
                "in_tenant": self._tenant,
                "in_day": day,
                "in_tokens": tokens,
                "in_cost": cost_usd or 0,
                "in_unpriced": int(cost_usd is None),
            },
        )

    async def row(self) -> TenantControlRow | None:
        return await self._db.get(TenantControlRow, self._tenant)

    async def quotas(self) -> Quotas:
        """The figures the table holds for the tenant (None: not set there)."""
        row = await self.row()
        if row is None:
            return Quotas()
        return Quotas(**{n: _figure(getattr(row, n)) for n in QUOTA_NAMES})

    async def frozen(self) -> bool:
        row = await self.row()
        return row is not None and row.frozen

    async def set_quotas(self, changes: dict[str, Any], by: str) -> Quotas:
        """Set (a number) or clear (None: back to the default) the named figures."""
        unknown = sorted(set(changes) - set(QUOTA_NAMES))
        if unknown:
            raise ValueError(f"{unknown[0]}: not a quota (one of {', '.join(QUOTA_NAMES)})")
        try:
            Quotas(**{k: v for k, v in changes.items() if v is not None})
        except ValidationError as err:  # our words, naming the field (no input echoed)
            first = err.errors(include_url=False, include_input=False)[0]
            raise ValueError(f"{first['loc'][0]}: {first['msg']}") from None
        values = {**changes, "updated_by": by, "updated_at": func.now()}
        stmt = insert(_CONTROLS).values(tenant_id=self._tenant, **values)
        await self._db.execute(
            stmt.on_conflict_do_update(index_elements=[_CONTROLS.c.tenant_id], set_=values)
        )
        await self._db.flush()
        self._db.expire_all()
        return await self.quotas()

    async def check_known(self) -> None:
        """TenantNotFound unless something names the tenant: a session, an API key, a device
        or a row of its controls. There is no table of tenants; these are what make one."""
        tenant = self._tenant
        named = or_(
            exists().where(SessionRow.tenant_id == tenant),
            exists().where(ApiKeyRow.tenant_id == tenant),
            exists().where(DeviceRow.tenant_id == tenant),
            exists().where(TenantControlRow.tenant_id == tenant),
        )
        if not await self._db.scalar(select(named)):
            raise TenantNotFound(tenant)

    async def set_frozen(self, frozen: bool, by: str) -> bool:
        """Freeze or thaw the tenant; False when it already was."""
        was = await self.frozen()
        values = {"frozen": frozen, "frozen_by": by, "frozen_at": func.now()}
        stmt = insert(_CONTROLS).values(tenant_id=self._tenant, updated_by=by, **values)
        await self._db.execute(
            stmt.on_conflict_do_update(index_elements=[_CONTROLS.c.tenant_id], set_=values)
        )
        self._db.expire_all()
        return was != frozen

    async def parked_sessions(self, statuses: tuple[str, ...]) -> list[uuid.UUID]:
        """The tenant's sessions in `statuses` (the ones a thaw or a raised quota wakes)."""
        rows = await self._db.scalars(
            select(SessionRow.id).where(
                SessionRow.tenant_id == self._tenant, SessionRow.status.in_(statuses)
            )
        )
        return list(rows)

    async def check_start(self, defaults: Quotas | None, now: datetime | None = None) -> None:
        """TenantFrozen, or QuotaRefused naming the quota a new task would break. Run in
        the start's own transaction: the tenant's starts are serialized from here to its
        commit, so two starts cannot both take the last place."""
        now = now or datetime.now(UTC)
        quotas = await self._open_to_work(defaults, now)
        if all(getattr(quotas, n) is None for n in START_QUOTAS):
            return
        await self.lock_starts()
        counts = await self._db.execute(
            select(
                func.count().filter(SessionRow.status.in_(RUNNING_STATUSES)),
                func.count().filter(SessionRow.status.in_(PARKED_STATUSES)),
                func.count().filter(
                    SessionRow.parent_id.is_(None),
                    SessionRow.created_at > now - timedelta(minutes=1),
                ),
            ).where(*self._tasks())
        )
        running, parked, recent = counts.one()
        for name, have in (
            ("running_tasks", running),
            ("parked_tasks", parked),
            ("starts_per_minute", recent),
        ):
            limit = getattr(quotas, name)
            if limit is not None and have >= limit:
                raise QuotaRefused(
                    f"quota {name} reached for tenant {self._tenant!r}: {have} of {limit}; "
                    "a new task may start once it is under (or the quota is raised)"
                )

    async def check_resume(
        self, session_id: uuid.UUID, defaults: Quotas | None, now: datetime | None = None
    ) -> None:
        """TenantFrozen, or QuotaRefused naming the quota that a task resumed (counted among
        the running again) would break; in the resume's own transaction, as a start's."""
        quotas = await self._open_to_work(defaults, now or datetime.now(UTC))
        await self.check_running(quotas, session_id, "the task may resume once it is under")

    async def check_running(self, quotas: Quotas, session_id: uuid.UUID, then: str) -> None:
        """QuotaRefused when the tenant's other tasks fill `quotas.running_tasks`, so the
        session may not take a place among them (`then`: when it may)."""
        if quotas.running_tasks is None:
            return
        await self.lock_starts()
        running = await self.running(besides=session_id)
        if running >= quotas.running_tasks:
            raise QuotaRefused(
                f"quota running_tasks reached for tenant {self._tenant!r}: {running} of "
                f"{quotas.running_tasks}; {then} (or the quota is raised)"
            )

    async def _open_to_work(self, defaults: Quotas | None, now: datetime) -> Quotas:
        """TenantFrozen, or QuotaRefused at a spend quota; else the quotas in force."""
        row = await self.row()
        if row is not None and row.frozen:
            raise TenantFrozen(self._tenant)
        quotas = (await self.quotas()).over(defaults)
        if quotas.spend_limited():
            await self._check_spend(quotas, now.date())
        return quotas

    async def lock_starts(self) -> None:
        """Serialize what takes a place among the tenant's running tasks (a start, a resume,
        a sub-agent) until this transaction ends, so two cannot both take the last one."""
        lock = zlib.crc32(f"quota-start:{self._tenant}".encode()) - 2**31
        await self._db.execute(select(func.pg_advisory_xact_lock(literal(lock))))

    async def running(self, *, besides: uuid.UUID | None = None) -> int:
        """How many of the tenant's tasks count as running (`besides`: not counting it)."""
        where = self._tasks()
        if besides is not None:
            where.append(SessionRow.id != besides)
        count = await self._db.scalar(
            select(func.count()).where(SessionRow.status.in_(RUNNING_STATUSES), *where)
        )
        return int(count or 0)

    def _tasks(self) -> list[Any]:
        return [
            SessionRow.tenant_id == self._tenant,
            # A conversation another SDK keeps in AgentState is not a task.
            ~SessionRow.agent_definition.startswith(EXTERNAL_PREFIX, autoescape=True),
        ]

    async def _check_spend(self, quotas: Quotas, day: date) -> None:
        # A start over the day's or month's spend would park before its first step.
        for period, since in (("day", day), ("month", month_start(day))):
            spent = await self.spent(since, day)
            words = spend_over(quotas, period, spent)
            if words:
                raise QuotaRefused(
                    f"quota {words} for tenant {self._tenant!r}; a new task may start once "
                    f"the {period} rolls over (UTC) or the quota is raised"
                )


def spend_over(quotas: Quotas, period: str, spent: Spent) -> str | None:
    """'tokens_per_day reached: 120 of 100' for the first figure of `period` at or past
    its quota, else None. Unpriced spend cannot be held to a cost quota: it counts as over."""
    tokens = getattr(quotas, f"tokens_per_{period}")
    cost = getattr(quotas, f"cost_usd_per_{period}")
    if tokens is not None and spent.tokens >= tokens:
        return f"tokens_per_{period} reached: {spent.tokens} of {tokens}"
    if cost is not None and (spent.cost_usd is None or spent.cost_usd >= Decimal(str(cost))):
        have = "unpriced" if spent.cost_usd is None else f"{spent.cost_usd:.6f}"
        return f"cost_usd_per_{period} reached: {have} of {cost}"
    return None
