"""A device (holding only its device key) SIGKILLed mid-call: its lease runs out, the call
is offered again to the device when it comes back, and the result commits once."""

from __future__ import annotations

import asyncio
import hashlib
import time
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


async def _blocks_received(record: Path, count: int, within: float = 60) -> None:
    async with asyncio.timeout(within):
        while True:
            if len(recorded(record, "block")) >= count:
                return
            await asyncio.sleep(0.1)


async def test_device_killed_mid_call_gets_the_call_again_and_it_commits_once(
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
    key = await make_device_key(resources, tenant, device_id)
    script = [
        {"tool_calls": [{"name": "dev__block", "arguments": {"token": "t1"}}]},
        {"text": "done"},
    ]
    async with gateway_server(migrated, resources, client) as url:

        def device(n: int) -> GatewayDeviceProcess:
            proc = GatewayDeviceProcess(url, key, tmp_path, tmp_path / f"device{n}.log")
            proc.args += ["--mcp-servers", "tests.support.mcp_device_servers:SERVERS"]
            proc.env["MCP_RECORD"] = str(record)
            return proc

        first, second = device(1), device(2)
        first.start()
        try:
            await first.wait_serving()
            stand_ins = await registered_device_tools(resources.sessions, tenant, device_id)
            registry = ToolRegistry.of([*default_registry().tools.values(), *stand_ins])
            provider = ScriptedProvider.from_data(script)
            async with agent_worker(provider, workspace, registry=registry) as queue:
                session_id, handle = await start(
                    client,
                    resources,
                    queue,
                    tenant=tenant,
                    device_id=device_id,
                    device_tools=["dev__block"],
                )
                await _blocks_received(record, 1)
                first.kill()  # mid-call: no completion, no more lease renewals
                killed_at = time.monotonic()
                second.start()
                await second.wait_serving()
                result = await asyncio.wait_for(handle.result(), 120)
                recovered_in = time.monotonic() - killed_at
        finally:
            first.kill()
            second.stop()
    assert result.status == "completed"
    print(f"device call recovered {recovered_in:.1f}s after the SIGKILL")
    (committed,) = [
        i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"
    ]
    sha = hashlib.sha256(b"unblocked t1").hexdigest()
    assert committed.data["artifact"]["sha256"] == sha
    assert await s3_sha256(resources, stored_key(resources, committed)) == sha
    # Run twice on the device (the first run died with it), under the call's one key.
    assert [c["key"] for c in recorded(record, "block")] == [committed.idempotency_key] * 2
