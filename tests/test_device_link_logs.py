"""The device never logs the presigned URL it uploads a result to: the URL is a bearer
credential. At DEBUG, what the device logs of an upload names the call and the result's
sha256, never the URL or its signed query."""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path

import pytest
from pydantic import SecretStr
from temporalio.client import Client

from durable_agents.activities.agents import DEFAULT_AGENT
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.activities.tools.fetch_policy import PUBLIC_ONLY
from durable_agents.workers.device.calls import LocalTools
from durable_agents.workers.device.link import DeviceLinkSettings, run_device_link
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.device_gateway import gateway_server, make_device_key
from tests.support.helpers import items_of, start
from tests.test_device_link_lease_lost import READ_ON_DEVICE, _registered

# What runs in this process besides the device: the gateway, the worker and their S3 client
# (botocore logs its own signed requests at DEBUG). The device process holds none of them.
CLOUD_SIDE = ("botocore", "aiobotocore", "temporalio", "durable_agents.workers.gateway")


async def test_an_upload_logs_the_call_and_digest_never_the_presigned_url(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    laptop = tmp_path / "laptop"
    laptop.mkdir()
    (laptop / "notes.txt").write_text("only on the laptop")
    tools = LocalTools({DEFAULT_AGENT: default_registry()}, laptop, PUBLIC_ONLY, 64 * 1024)
    device_id = f"laptop-{uuid.uuid4().hex[:6]}"
    link_key = SecretStr(await make_device_key(resources, tenant, device_id))
    stop = asyncio.Event()
    async with (
        agent_worker(ScriptedProvider.from_data(READ_ON_DEVICE), workspace) as queue,
        gateway_server(migrated, resources, client) as url,
    ):
        link = DeviceLinkSettings(gateway_url=url, device_key=link_key)
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
            result = await asyncio.wait_for(handle.result(), 60)
        finally:
            stop.set()
            await device
    assert result.status == "completed"
    (uploaded,) = [
        i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"
    ]
    sha = uploaded.data["artifact"]["sha256"]
    logged = [r.getMessage() for r in caplog.records if not r.name.startswith(CLOUD_SIDE)]
    leaked = [m for m in logged if "X-Amz-Signature" in m or "X-Amz-Credential" in m]
    assert not leaked, leaked
    assert any("HTTP Request: PUT" in m for m in logged)  # httpx's line, without its query
    assert any(f"result uploaded (18 bytes, sha256 {sha})" in m for m in logged)
