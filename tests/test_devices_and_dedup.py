"""Device-local tools run on the device's own queue; equal bytes are stored once per tenant."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from pathlib import Path

from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tool_run import ToolActivities
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.workers.client import tasks
from durable_agents.workers.process.cloud import running
from durable_agents.workers.process.device_worker import build_device_worker
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support.gateway import poll
from tests.support.helpers import (
    artifact_count,
    items_of,
    register_device,
    s3_keys,
    session_root,
    start,
    tenant_root,
)


def _read(path: str) -> ScriptedProvider:
    return ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "read_file", "arguments": {"path": path}}]}]
    )


async def test_device_tool_runs_on_the_device_queue_and_cloud_steps_do_not(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    laptop = tmp_path / "laptop"
    laptop.mkdir()
    (laptop / "notes.txt").write_text("only on the laptop")
    sid = uuid.uuid4()
    (session_root(workspace, tenant, sid) / "notes.txt").write_text("cloud copy")
    device_id = f"laptop-{tenant}"
    tools = ToolActivities(
        resources.sessions,
        resources.store,
        default_registry(),
        workspace=laptop,
    )
    provider = _read("notes.txt")
    await register_device(resources, tenant, device_id, ["read_file"], seen_ago_s=3600)
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            session_id=sid,
            device_id=device_id,
            device_tools=["read_file"],
        )

        # Nothing serves the device yet: the call waits on its queue, the task stays open,
        # and every device can see that it waits for the device.
        async def statuses() -> tuple[str, str]:
            row, _ = await tasks.read_session(resources.sessions, tenant, session_id)
            return (await tasks.live_status(client, session_id)).status, row.status

        waiting = ("waiting_device", "waiting_device")
        await poll(statuses, lambda found: found == waiting, within_seconds=60)
        # No result yet (the model took its next step meanwhile: it is told the call is pending).
        items = await items_of(resources, tenant, session_id)
        assert "tool_call" in [i.kind for i in items]
        assert "tool_result" not in [i.kind for i in items]
        async with running(build_device_worker(client, tenant, device_id, tools)):
            result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    told = next(m for m in provider.requests[-1].messages if m.role == "tool")
    assert told.content == "only on the laptop"


async def test_same_bytes_in_two_sessions_of_a_tenant_are_stored_once(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    data = b"shared page\n" * 1000
    # Tenant scope: both sessions see the one file of their tenant.
    (tenant_root(workspace, tenant) / "page.txt").write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    sessions = []
    for _ in range(2):
        async with agent_worker(_read("page.txt"), workspace, workspace_scope="tenant") as queue:
            session_id, handle = await start(client, resources, queue, tenant=tenant)
            await asyncio.wait_for(handle.result(), 30)
            sessions.append(session_id)

    refs = []
    for session_id in sessions:
        result = next(
            i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"
        )
        refs.append(result.artifact_id)
    assert refs[0] is not None and refs[0] == refs[1]
    assert await artifact_count(resources, tenant, sha) == 1
    keys = await s3_keys(resources, f"{resources.store.prefix}/{tenant}/")
    assert [k for k in keys if k.endswith(sha)] == [
        f"{resources.store.prefix}/{tenant}/sha256/{sha[:2]}/{sha[2:4]}/{sha}"
    ]
