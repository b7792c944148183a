"""Device repository: which devices serve device-local tools, and when each was last seen.

All SQL on `devices`, scoped to one tenant. Never commits. Presence uses the database
clock (now()) on both sides, so a skewed device or CLI clock cannot make a device look
online or offline.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from durable_agents.storage.device_models import DeviceRow
from durable_agents.storage.models import ApiKeyRow

# A device id becomes part of a Temporal task-queue name (device:{tenant}:{id}) and appears in
# logs and shell commands: keep it to a short, unambiguous alphabet (no ':').
DEVICE_ID_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
# What counts as online when nobody says otherwise: six missed 5 s heartbeats.
ONLINE_WITHIN = timedelta(seconds=30)


def validate_device_id(device_id: str) -> str:
    """Return `device_id` if it is usable as a device id, else raise ValueError."""
    if not isinstance(device_id, str) or DEVICE_ID_RE.fullmatch(device_id) is None:
        raise ValueError(
            f"invalid device id {device_id!r}: use 1-64 characters of letters, digits, "
            "'.', '_' and '-'"
        )
    return device_id


class DeviceRepository:
    def __init__(self, db: AsyncSession, tenant_id: str) -> None:
        self._db = db
        self._tenant = tenant_id

    async def register(
        self, device_id: str, tools: list[str], tool_specs: list[dict[str, Any]] | None = None
    ) -> DeviceRow:
        """Create the device or replace its tool list (and the specs of its MCP tools);
        either way it is seen now.

        registered_at keeps the first registration, so a restart does not look like a
        new device.
        """
        validate_device_id(device_id)
        values = insert(DeviceRow).values(
            tenant_id=self._tenant, device_id=device_id, tools=list(tools), tool_specs=tool_specs
        )
        stmt = values.on_conflict_do_update(
            index_elements=[DeviceRow.tenant_id, DeviceRow.device_id],
            set_={
                "tools": values.excluded.tools,
                "tool_specs": values.excluded.tool_specs,
                "last_seen_at": func.now(),
            },
        ).returning(DeviceRow)
        # populate_existing: a row already loaded in this unit of work must show the update.
        result = await self._db.scalars(stmt, execution_options={"populate_existing": True})
        # An upsert with RETURNING always returns its one row.
        row: DeviceRow = result.one()
        return row

    async def heartbeat(self, device_id: str) -> bool:
        """Mark the device seen now; False if it was never registered for this tenant."""
        validate_device_id(device_id)
        found = await self._db.scalar(
            update(DeviceRow)
            .where(DeviceRow.tenant_id == self._tenant, DeviceRow.device_id == device_id)
            .values(last_seen_at=func.now())
            .returning(DeviceRow.device_id)
        )
        return found is not None

    async def get(self, device_id: str) -> DeviceRow | None:
        """The device, or None if this tenant has no device of that id."""
        validate_device_id(device_id)
        row: DeviceRow | None = await self._db.scalar(
            select(DeviceRow).where(
                DeviceRow.tenant_id == self._tenant, DeviceRow.device_id == device_id
            )
        )
        return row

    async def all(self) -> list[DeviceRow]:
        """Every device of the tenant, by id."""
        rows = await self._db.scalars(
            select(DeviceRow)
            .where(DeviceRow.tenant_id == self._tenant)
            .order_by(DeviceRow.device_id)
        )
        return list(rows)

    async def is_online(self, device_id: str, within: timedelta = ONLINE_WITHIN) -> bool:
        """Whether the device was seen within `within` of the database's now()."""
        validate_device_id(device_id)
        found = await self._db.scalar(
            select(DeviceRow.device_id).where(
                DeviceRow.tenant_id == self._tenant,
                DeviceRow.device_id == device_id,
                DeviceRow.last_seen_at >= func.now() - within,
            )
        )
        return found is not None

    async def online_ids(self, within: timedelta = ONLINE_WITHIN) -> set[str]:
        """Ids of the tenant's devices seen within `within`: one query for a whole listing."""
        rows = await self._db.scalars(
            select(DeviceRow.device_id).where(
                DeviceRow.tenant_id == self._tenant,
                DeviceRow.last_seen_at >= func.now() - within,
            )
        )
        return set(rows)

    async def served_by_gateways(self, device_id: str) -> bool:
        """Whether the tenant holds a live device key for the device: then it reaches the
        cloud through the gateways (its calls are recorded in `device_calls` and leased by
        any gateway it polls), not through a Temporal worker of its own."""
        validate_device_id(device_id)
        found = await self._db.scalar(
            select(ApiKeyRow.key_id)
            .where(
                ApiKeyRow.tenant_id == self._tenant,
                ApiKeyRow.device_id == device_id,
                ApiKeyRow.revoked_at.is_(None),
                or_(ApiKeyRow.expires_at.is_(None), ApiKeyRow.expires_at > func.now()),
            )
            .limit(1)
        )
        return found is not None
