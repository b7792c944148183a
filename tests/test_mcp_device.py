"""A device-local MCP server: the device worker spawns it and serves its tools on the
device's queue; the cloud offers them from the specs the device registered, never
running the server itself."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.base import ToolRegistry
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.activities.tools.mcp_device import registered_device_tools
from durable_agents.storage.devices import DeviceRepository
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.helpers import items_of, s3_sha256, start, stored_key
from tests.support.mcp import REPO, recorded
from tests.support.mcp_device_servers import AGENTS
from tests.support.processes import DeviceProcess


async def test_device_local_mcp_tool_runs_on_the_device_from_specs_it_registered(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    record = tmp_path / "record.jsonl"
    device_id = f"laptop-{uuid.uuid4().hex[:6]}"
    device = DeviceProcess(migrated, tenant, device_id, workspace, tmp_path / "device.log")
    device.args += ["--mcp-servers", "tests.support.mcp_device_servers:SERVERS"]
    device.env.update(MCP_RECORD=str(record), PYTHONPATH=str(REPO))
    device.start()
    try:
        await device.wait_serving(resources)
        async with resources.sessions() as db:
            row = await DeviceRepository(db, tenant).get(device_id)
        assert row is not None and "dev__echo" in row.tools
        assert "cloudbox__echo" not in row.tools  # not device-local: not the device's
        # The cloud's registry: built-ins plus stand-ins from what the device registered.
        stand_ins = await registered_device_tools(resources.sessions, tenant, device_id)
        assert {t.spec.name for t in stand_ins} >= {"dev__echo", "dev__make_report"}
        registry = ToolRegistry.of([*default_registry().tools.values(), *stand_ins])
        script = [
            {"tool_calls": [{"name": "dev__echo", "arguments": {"text": "on the laptop"}}]},
            {"text": "done"},
        ]
        provider = ScriptedProvider.from_data(script)
        async with agent_worker(provider, workspace, registry=registry) as queue:
            session_id, handle = await start(
                client,
                resources,
                queue,
                tenant=tenant,
                device_id=device_id,
                device_tools=["dev__echo"],
            )
            await handle.result()
            # A task not started on the device: the cloud never runs the server itself.
            elsewhere, handle = await start(client, resources, queue, tenant=tenant)
            await handle.result()
    finally:
        device.stop()
    (result,) = [
        i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"
    ]
    sha = hashlib.sha256(b"echo: on the laptop").hexdigest()
    assert result.data["artifact"]["sha256"] == sha
    assert await s3_sha256(resources, stored_key(resources, result)) == sha
    # The server the device spawned ran it, under the call's key.
    assert [(c["tool"], c["key"]) for c in recorded(record)] == [("echo", result.idempotency_key)]
    (refused,) = [
        i for i in await items_of(resources, tenant, elsewhere) if i.kind == "tool_result"
    ]
    assert refused.data["error_type"] == "DeviceOnly"


async def test_an_agent_s_device_local_server_is_offered_only_to_tasks_on_a_device(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    record = tmp_path / "record.jsonl"
    device_id = f"laptop-{uuid.uuid4().hex[:6]}"
    device = DeviceProcess(migrated, tenant, device_id, workspace, tmp_path / "device.log")
    device.env.update(
        MCP_RECORD=str(record),
        PYTHONPATH=str(REPO),
        AGENT_DEFINITIONS="tests.support.mcp_device_servers:AGENTS",
    )
    device.start()
    script = [
        {"tool_calls": [{"name": "dev__echo", "arguments": {"text": "from the agent"}}]},
        {"text": "done"},
    ]
    provider = ScriptedProvider.from_data(script)
    try:
        await device.wait_serving(resources)
        # The cloud worker never runs the device's server: it only knows the declaration.
        async with agent_worker(provider, workspace, agents=tuple(AGENTS)) as queue:
            on_device, handle = await start(
                client, resources, queue, tenant=tenant, device_id=device_id, agent="devhelper"
            )
            assert (await handle.result()).status == "completed"
            cloud_only, handle = await start(
                client, resources, queue, tenant=tenant, agent="devhelper"
            )
            await handle.result()
    finally:
        device.stop()
    (result,) = [i for i in await items_of(resources, tenant, on_device) if i.kind == "tool_result"]
    assert result.text == "echo: from the agent"
    assert [(c["tool"], c["key"]) for c in recorded(record)] == [("echo", result.idempotency_key)]
    offered = [sorted(t.name for t in r.tools) for r in provider.requests]
    assert "dev__echo" in offered[0] and "dev__echo" not in offered[-1]
    (unknown,) = [
        i for i in await items_of(resources, tenant, cloud_only) if i.kind == "tool_result"
    ]
    assert unknown.data["error_type"] == "UnknownTool"
