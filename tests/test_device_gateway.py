"""A device that holds a device key and nothing else: a real `agentctl device` started with
only AGENT_GATEWAY_URL and AGENT_DEVICE_KEY (no database, S3 or Temporal setting) serves
its built-in tools and its device-local MCP server through a real gateway, and the results
commit upload -> verify -> commit like any other."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from pathlib import Path

from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.base import ToolRegistry
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.activities.tools.mcp_device import registered_device_tools
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.device_gateway import GatewayDeviceProcess, gateway_server, make_device_key
from tests.support.helpers import items_of, s3_sha256, start, stored_key
from tests.support.mcp import recorded

FORBIDDEN_ENV = ("DATABASE_URL", "S3_ENDPOINT_URL", "S3_SECRET_ACCESS_KEY", "TEMPORAL_ADDRESS")


async def test_device_with_only_a_device_key_completes_built_in_and_mcp_calls(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    device_ws = tmp_path / "laptop"
    device_ws.mkdir()
    (device_ws / "notes.txt").write_bytes(b"only on the laptop")
    record = tmp_path / "record.jsonl"
    device_id = f"laptop-{uuid.uuid4().hex[:6]}"
    key = await make_device_key(resources, tenant, device_id)
    async with gateway_server(migrated, resources, client) as url:
        device = GatewayDeviceProcess(url, key, device_ws, tmp_path / "device.log")
        device.args += ["--mcp-servers", "tests.support.mcp_device_servers:SERVERS"]
        device.env["MCP_RECORD"] = str(record)
        assert not set(FORBIDDEN_ENV) & set(device.env)
        device.start()
        try:
            await device.wait_serving()
            # Registered through the gateway: the cloud offers the MCP tool from its spec.
            stand_ins = await registered_device_tools(resources.sessions, tenant, device_id)
            assert "dev__echo" in {t.spec.name for t in stand_ins}
            registry = ToolRegistry.of([*default_registry().tools.values(), *stand_ins])
            script = [
                {
                    "tool_calls": [
                        {"name": "read_file", "arguments": {"path": "notes.txt"}},
                        {"name": "dev__echo", "arguments": {"text": "via the gateway"}},
                    ]
                },
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
                    device_tools=["read_file", "dev__echo"],
                )
                result = await handle.result()
        finally:
            device.stop()
    assert result.status == "completed"
    results = {
        i.tool_name: i
        for i in await items_of(resources, tenant, session_id)
        if i.kind == "tool_result"
    }
    assert set(results) == {"read_file", "dev__echo"}
    for name, body in (
        ("read_file", b"only on the laptop"),
        ("dev__echo", b"echo: via the gateway"),
    ):
        sha = hashlib.sha256(body).hexdigest()
        assert results[name].data["artifact"]["sha256"] == sha, results[name].data
        assert await s3_sha256(resources, stored_key(resources, results[name])) == sha
    # The device's MCP server ran the call under its idempotency key, once.
    echo = results["dev__echo"]
    assert [(c["tool"], c["key"]) for c in recorded(record)] == [("echo", echo.idempotency_key)]
    log = device.log.read_text()
    assert key.split("_", 2)[2] not in log  # the secret is never logged


async def test_a_device_with_a_bad_key_stops_with_one_error_line(
    client: Client, resources: Resources, migrated: StackEndpoints, tmp_path: Path
) -> None:
    async with gateway_server(migrated, resources, client) as url:
        device = GatewayDeviceProcess(
            url, "da_0123456789abcdef_" + "x" * 43, tmp_path, tmp_path / "d.log"
        )
        device.start()
        assert device.proc is not None
        code = await asyncio.to_thread(device.proc.wait, 60)
    log = device.log.read_text()
    assert code == 1, log
    assert "error: registration refused: 401" in log and "Traceback" not in log
