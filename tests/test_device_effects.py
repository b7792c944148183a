"""The effects contract on the device path: a device that cannot tell whether an effectful
call acted reports it in doubt, the loop asks a person before anything runs again, and the
call's one result says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.device_gateway import device_link
from tests.support.gateway import poll
from tests.support.helpers import items_of, start, wait_for_pending

WRITE_ON_DEVICE = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}]},
    {"text": "done"},
]


async def test_a_device_s_in_doubt_call_is_not_run_again_without_a_person(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    provider = ScriptedProvider.from_data(WRITE_ON_DEVICE)
    async with (
        agent_worker(provider, workspace) as queue,
        device_link(migrated, resources, client, tenant, ["write_file"]) as device,
    ):
        http, auth, device_id = device.http, device.auth, device.device_id
        session_id, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            device_id=device_id,
            device_tools=["write_file"],
        )
        decide: dict[str, Any] = {"sessions": resources.sessions, "tenant_id": tenant}
        (call_id,) = await wait_for_pending(client, session_id)
        await verbs.approve(client, session_id, call_id, "ann", **decide)
        got = await http.post("/v1/device/calls/next", params={"wait": 20}, headers=auth)
        assert got.status_code == 200, got.text
        doubt = {
            "error": {"type": "EffectInDoubt", "message": "the device lost track of the write"},
            "effect": "in_doubt",
        }
        done = await http.post(
            f"/v1/device/calls/{got.json()['call_id']}/complete", json=doubt, headers=auth
        )
        assert done.status_code == 200, done.text
        # A person is asked whether to run it again; nothing runs meanwhile.
        live = await poll(
            lambda: tasks.live_status(client, session_id), lambda s: bool(s.pending_approvals)
        )
        (again,) = live.pending_approvals
        assert again.tool_call_id == call_id and again.rerun is True
        quiet = await http.post("/v1/device/calls/next", params={"wait": 1}, headers=auth)
        assert quiet.status_code == 204
        await verbs.reject(client, session_id, call_id, "leave it", "ann", **decide)
        result = await handle.result()
    assert result.status == "completed"
    results = [i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"]
    assert results[0].data["effect"] == "in_doubt"
    assert results[0].data["error_type"] == "EffectInDoubt"
