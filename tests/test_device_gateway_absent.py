"""A device that connected once and went away: nobody takes its call, which meets the
bound of its dispatch (the device's wait plus the tool's timeout) and the model is told
the device is offline; the task does not hang."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.device_calls import DeviceCallRepository
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from durable_agents.workflows.policies import TOOL_RETRY
from tests.conftest import AgentRunner
from tests.support.device_gateway import device_link
from tests.support.helpers import items_of, start

READ_ON_DEVICE = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
    {"text": "the device is away"},
]


async def test_a_device_gone_after_connecting_is_reported_offline_to_the_model(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    provider = ScriptedProvider.from_data(READ_ON_DEVICE)
    async with (
        agent_worker(provider, workspace) as queue,
        device_link(migrated, resources, client, tenant, ["read_file"]) as device,
    ):
        http, auth, device_id = device.http, device.auth, device.device_id
        once = await http.post("/v1/device/calls/next", params={"wait": 0}, headers=auth)
        assert once.status_code == 204  # connected once, then gone
        began = time.monotonic()
        session_id, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            device_id=device_id,
            device_tools=["read_file"],
            tool_timeout_seconds=20,
            device_schedule_to_start_seconds=3,
        )
        result = await asyncio.wait_for(handle.result(), 120)
        took = time.monotonic() - began
    print(f"model told the device is offline {took:.1f}s after the start")
    assert result.status == "completed"
    (told,) = [i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"]
    assert told.data["error_type"] == "DeviceOffline", told.data
    # Told because nobody took the call within its bound, not because every attempt
    # timed out: retries were left.
    async with resources.sessions() as db:
        (call,) = await DeviceCallRepository(db, tenant, device_id).waiting()
    assert call.attempt < TOOL_RETRY.maximum_attempts, call.attempt
