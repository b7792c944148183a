"""`agentctl devices`: the tenant's device workers, their tools, and whether they are online."""

from __future__ import annotations

from datetime import UTC

from rich.table import Table

from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.device_models import DeviceRow
from durable_agents.storage.devices import ONLINE_WITHIN
from durable_agents.workers.cli.common import (
    Tenant,
    console,
    run_async,
    tenant_or_default,
    with_resources,
)
from durable_agents.workers.resources import Resources


def devices_table(rows: list[DeviceRow], online: set[str]) -> Table:
    """One row per device; `online` holds the ids seen within ONLINE_WITHIN."""
    window = int(ONLINE_WITHIN.total_seconds())
    table = Table(title="devices", show_lines=False)
    table.add_column("device", no_wrap=True)
    table.add_column("tools", overflow="fold")
    table.add_column("last seen (UTC)", no_wrap=True)
    table.add_column(f"online ({window}s)", no_wrap=True)
    for row in rows:
        table.add_row(
            row.device_id,
            ", ".join(row.tools),
            row.last_seen_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"),
            "yes" if row.device_id in online else "no",
        )
    return table


def devices(tenant: Tenant = None) -> None:
    """Devices of the tenant: the tools each serves, when it was last seen, if it is online."""
    t = tenant_or_default(tenant)

    async def go(res: Resources) -> tuple[list[DeviceRow], set[str]]:
        async with agent_state(res.sessions, t) as st:
            # Both read in one transaction, so the listing and the online flags agree.
            return await st.devices.all(), await st.devices.online_ids(ONLINE_WITHIN)

    rows, online = run_async(with_resources(go))
    if not rows:
        console.print(
            "no devices registered (issue a key with `agentctl keys create --device ID`, then "
            "run `agentctl device` with AGENT_GATEWAY_URL and AGENT_DEVICE_KEY)"
        )
        return
    console.print(devices_table(rows, online))
