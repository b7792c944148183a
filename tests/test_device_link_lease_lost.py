"""A device whose lease ran out while its tool was still running (a laptop asleep past the
lease) hears so from its next heartbeat (409 not_leased): it stops the tool, sends
nothing, and goes back to polling; the call is offered again and committed once, under the
new lease."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import uuid
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from sqlalchemy import func, select, update
from temporalio.client import Client

from durable_agents.activities.agents import DEFAULT_AGENT
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.base import ToolContext, ToolOutput, ToolRegistry
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.activities.tools.fetch_policy import PUBLIC_ONLY
from durable_agents.storage.device_calls import DONE, LEASED
from durable_agents.storage.device_models import DeviceCallRow
from durable_agents.storage.devices import DeviceRepository
from durable_agents.workers.device.calls import LocalTools
from durable_agents.workers.device.link import DeviceLinkSettings, run_device_link
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import GatewaySettings
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.device_gateway import make_device_key
from tests.support.gateway import gateway_server
from tests.support.helpers import items_of, start

READ_ON_DEVICE: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
    {"text": "done"},
]
CONTENT = b"what the file says"


class SlowThenQuick:
    """read_file on the device: its first run waits until it is stopped, later runs answer."""

    def __init__(self) -> None:
        self.runs = 0
        self.first_started = asyncio.Event()
        self.first_stopped = asyncio.Event()

    async def __call__(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutput:
        self.runs += 1
        if self.runs == 1:
            self.first_started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.first_stopped.set()
                raise
        return ToolOutput(CONTENT)


async def _registered(res: Resources, tenant: str, device_id: str) -> None:
    for _ in range(300):
        async with res.sessions() as db:
            if await DeviceRepository(db, tenant).get(device_id) is not None:
                return
        await asyncio.sleep(0.1)
    raise AssertionError("the device did not register")


async def _lease_runs_out(res: Resources, tenant: str, device_id: str) -> None:
    """What time does to the row while the device is away past its lease."""
    async with res.sessions() as db, db.begin():
        await db.execute(
            update(DeviceCallRow)
            .where(
                DeviceCallRow.tenant_id == tenant,
                DeviceCallRow.device_id == device_id,
                DeviceCallRow.state == LEASED,
            )
            .values(lease_expires_at=func.now() - func.make_interval(0, 0, 0, 0, 0, 0, 1))
        )


async def test_a_device_told_its_lease_ran_out_stops_the_call_and_polls_again(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    tool = SlowThenQuick()
    read_file = default_registry().get("read_file")
    assert read_file is not None
    registry = ToolRegistry.of([dataclasses.replace(read_file, fn=tool)])
    tools = LocalTools({DEFAULT_AGENT: registry}, workspace, PUBLIC_ONLY, 64 * 1024)
    device_id = f"laptop-{uuid.uuid4().hex[:6]}"
    key = SecretStr(await make_device_key(resources, tenant, device_id))
    # A 6 s lease: the device renews every 2 s.
    settings = GatewaySettings(rate_per_second=1000, burst=1000, device_lease_seconds=6)
    provider = ScriptedProvider.from_data(READ_ON_DEVICE)
    stop = asyncio.Event()
    async with (
        agent_worker(provider, workspace) as queue,
        gateway_server(
            migrated, resources, client, queue="unused", workspace=Path("unused"), gateway=settings
        ) as url,
    ):
        link = DeviceLinkSettings(gateway_url=url, device_key=key)
        device = asyncio.create_task(run_device_link(link, tools, ["read_file"], None, stop))
        try:
            await _registered(resources, tenant, device_id)
            session_id, handle = await start(
                client,
                resources,
                queue,
                tenant=tenant,
                device_id=device_id,
                device_tools=["read_file"],
            )
            await asyncio.wait_for(tool.first_started.wait(), 30)
            await _lease_runs_out(resources, tenant, device_id)
            # The next heartbeat is refused: the device stops the tool (before, the beat
            # revived the lease and the tool ran on).
            await asyncio.wait_for(tool.first_stopped.wait(), 15)
            result = await asyncio.wait_for(handle.result(), 60)
        finally:
            stop.set()
            await device
    assert result.status == "completed"
    assert tool.runs == 2
    async with resources.sessions() as db:
        (call,) = await db.scalars(
            select(DeviceCallRow).where(
                DeviceCallRow.tenant_id == tenant, DeviceCallRow.device_id == device_id
            )
        )
    # Leased twice, done once: the stopped run sent nothing.
    assert call.state == DONE and call.offers == 2
    (committed,) = [
        i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"
    ]
    assert committed.data["artifact"]["sha256"] == hashlib.sha256(CONTENT).hexdigest()
