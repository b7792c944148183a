"""Device calls: tool calls waiting for, or leased by, a device that reaches the cloud only
through the gateway.

All SQL on `device_calls`, scoped to one tenant AND one device: a device key's repository
cannot see another device's calls, of its tenant or any other. Never commits. Leases use
the database clock, so a skewed device clock cannot keep or steal a call.

A call that becomes pending NOTIFYs channel CALLS_CHANNEL with its (tenant, device), at
commit: every gateway process LISTENs once and wakes the long-polls of that device it
holds, so a device polling any gateway hears of its call at once. The notification is a
hint only (ids, no content): a poll that misses one claims the call at its next re-check.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

from sqlalchemy import ColumnElement, and_, case, func, or_, select, text, true, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.device_models import DeviceCallRow
from durable_agents.storage.devices import validate_device_id

PENDING, LEASED, DONE = "pending", "leased", "done"
# Object-store folder of a tenant where devices upload results before they are verified:
# `{prefix}/{tenant}/device-uploads/{call id}/{lease}` (storage.gc collects leftovers).
STAGING_DIR = "device-uploads"
CALLS_CHANNEL = "agent_device_calls"


def wake_payload(tenant_id: str, device_id: str) -> str:
    """The NOTIFY payload naming a device that has a call to take (ids only)."""
    return json.dumps({"t": tenant_id, "d": device_id}, separators=(",", ":"))


def parse_wake(payload: str) -> tuple[str, str] | None:
    """(tenant, device) of a wake-up; None for anything else on the channel."""
    try:
        data = json.loads(payload)
        return str(data["t"]), str(data["d"])
    except (ValueError, KeyError, TypeError):
        return None


class DeviceCallRepository:
    def __init__(self, db: AsyncSession, tenant_id: str, device_id: str) -> None:
        self._db = db
        self._tenant = tenant_id
        self._device = validate_device_id(device_id)

    def _mine(self) -> ColumnElement[bool]:
        return and_(
            DeviceCallRow.tenant_id == self._tenant, DeviceCallRow.device_id == self._device
        )

    async def offer(
        self,
        *,
        idempotency_key: str,
        session_id: uuid.UUID,
        tool_call_id: str,
        tool_name: str,
        step: int,
        rerun: int,
        task_token: bytes,
        attempt: int,
    ) -> DeviceCallRow:
        """Hand the call (this activity attempt of it) to the device: a new call is pending;
        a call handed over before gets the newer attempt's task token, and is pending again
        unless a device holds a live lease on it (then that device's completion completes
        the newer attempt, and the tool does not run a second time meanwhile)."""
        values = insert(DeviceCallRow).values(
            id=uuid.uuid4(),
            tenant_id=self._tenant,
            device_id=self._device,
            idempotency_key=idempotency_key,
            session_id=session_id,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            step=step,
            rerun=rerun,
            task_token=task_token,
            attempt=attempt,
            state=PENDING,
        )
        # A device still holding a live lease keeps the call (it is at work on it and
        # completes with the newest token); otherwise whoever held it is gone: pending.
        held = and_(DeviceCallRow.state == LEASED, DeviceCallRow.lease_expires_at > func.now())
        stmt = values.on_conflict_do_update(
            constraint="uq_device_calls_key",
            set_={
                "task_token": values.excluded.task_token,
                "attempt": values.excluded.attempt,
                "state": case((held, LEASED), else_=PENDING),
                "lease_expires_at": case((held, DeviceCallRow.lease_expires_at), else_=None),
                "updated_at": func.now(),
            },
            # A done call stays done; an older attempt never replaces a newer one's token.
            where=and_(
                DeviceCallRow.state != DONE, DeviceCallRow.attempt <= values.excluded.attempt
            ),
        ).returning(DeviceCallRow)
        row = await self._db.scalar(stmt, execution_options={"populate_existing": True})
        if row is None:  # done already, or a newer attempt holds it: return what is there
            found = await self._db.scalar(
                select(DeviceCallRow).where(
                    DeviceCallRow.tenant_id == self._tenant,
                    DeviceCallRow.idempotency_key == idempotency_key,
                )
            )
            if found is None:
                raise LookupError("device call vanished while being offered")
            return found
        if row.state == PENDING:
            await self._wake()
        return row

    async def _wake(self) -> None:
        # Delivered at commit (never for a call a poll could not read yet), once per
        # distinct payload in a transaction.
        await self._db.execute(
            text("SELECT pg_notify(:channel, :payload)"),
            {"channel": CALLS_CHANNEL, "payload": wake_payload(self._tenant, self._device)},
        )

    async def claim(self, lease: timedelta) -> DeviceCallRow | None:
        """Lease the oldest call that is pending, or whose lease ran out (its device went
        away mid-call), for `lease`; None if there is none. SKIP LOCKED: two polls of the
        same device never get the same call."""
        free = select(DeviceCallRow.id).where(
            self._mine(),
            or_(
                DeviceCallRow.state == PENDING,
                and_(DeviceCallRow.state == LEASED, DeviceCallRow.lease_expires_at < func.now()),
            ),
        )
        candidate = (
            free.order_by(DeviceCallRow.created_at).limit(1).with_for_update(skip_locked=True)
        )
        found = await self._db.scalar(candidate)
        if found is None:
            return None
        row: DeviceCallRow | None = await self._db.scalar(
            update(DeviceCallRow)
            .where(self._mine(), DeviceCallRow.id == found)
            .values(
                state=LEASED,
                lease_expires_at=func.now() + lease,
                offers=DeviceCallRow.offers + 1,
                updated_at=func.now(),
            )
            .returning(DeviceCallRow),
            execution_options={"populate_existing": True},
        )
        return row

    async def get(self, call_id: uuid.UUID, *, lock: bool = False) -> DeviceCallRow | None:
        """This device's call; None for a missing one and another device's alike."""
        query = select(DeviceCallRow).where(self._mine(), DeviceCallRow.id == call_id)
        if lock:
            query = query.with_for_update()
        row: DeviceCallRow | None = await self._db.scalar(
            query, execution_options={"populate_existing": True}
        )
        return row

    def _live(self, call_id: uuid.UUID, held: int | None) -> ColumnElement[bool]:
        """The call is this device's, leased (lease `held` when given) and the lease has
        time left by the database's clock: one that ran out stays dead even if nobody
        claimed the call since, so renewing or completing it is refused, not revived."""
        current = DeviceCallRow.offers == held if held is not None else true()
        return and_(
            self._mine(),
            DeviceCallRow.id == call_id,
            DeviceCallRow.state == LEASED,
            current,
            DeviceCallRow.lease_expires_at > func.now(),
        )

    async def extend(
        self, call_id: uuid.UUID, lease: timedelta, *, held: int | None = None
    ) -> DeviceCallRow | None:
        """Renew the live lease of a call this device holds (lease `held` only, when given:
        not a newer one); None if it holds no such lease. One statement checks and renews,
        so two gateways cannot both act on a lease that ran out."""
        row: DeviceCallRow | None = await self._db.scalar(
            update(DeviceCallRow)
            .where(self._live(call_id, held))
            .values(lease_expires_at=func.now() + lease, updated_at=func.now())
            .returning(DeviceCallRow),
            execution_options={"populate_existing": True},
        )
        return row

    async def lease_left(self, call_id: uuid.UUID, lease: int) -> timedelta | None:
        """How long this device's lease `lease` (the call's offer count when it was leased)
        has left; None once it is not the current lease, or has run out, or the call is
        pending, done or not this device's."""
        left: timedelta | None = await self._db.scalar(
            select(DeviceCallRow.lease_expires_at - func.now()).where(self._live(call_id, lease))
        )
        return left

    async def release(self, call_id: uuid.UUID, lease: int) -> None:
        """Offer the call again (its completion was refused), if `lease` is still the
        current lease: a newer one is not taken from whoever holds it."""
        released = await self._db.scalar(
            update(DeviceCallRow)
            .where(
                self._mine(),
                DeviceCallRow.id == call_id,
                DeviceCallRow.state == LEASED,
                DeviceCallRow.offers == lease,
            )
            .values(state=PENDING, lease_expires_at=None, updated_at=func.now())
            .returning(DeviceCallRow.id)
        )
        if released is not None:
            await self._wake()

    async def finish(self, call_id: uuid.UUID, lease: int) -> DeviceCallRow | None:
        """Mark the call done under its live lease `lease`, in one statement that checks
        the lease and takes the row (locked until the unit of work ends, which commits the
        result with it): never offered again. None if `lease` is not live, and then
        nothing is changed."""
        row: DeviceCallRow | None = await self._db.scalar(
            update(DeviceCallRow)
            .where(self._live(call_id, lease))
            .values(state=DONE, lease_expires_at=None, updated_at=func.now())
            .returning(DeviceCallRow),
            execution_options={"populate_existing": True},
        )
        return row

    async def waiting(self) -> list[DeviceCallRow]:
        """Calls not done yet (pending or leased), oldest first."""
        rows = await self._db.scalars(
            select(DeviceCallRow)
            .where(self._mine(), DeviceCallRow.state != DONE)
            .order_by(DeviceCallRow.created_at)
        )
        return list(rows)
