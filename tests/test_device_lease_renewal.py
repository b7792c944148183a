"""A device that renews its lease keeps its call past the lease and the activity's
heartbeat timeout (30 s each): nobody else is handed it, Temporal does not retry it, and
its result commits once, from the first attempt."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from pathlib import Path

from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.device_calls import DeviceCallRepository
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.device_gateway import device_link
from tests.support.helpers import items_of, start

READ_ON_DEVICE = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "big.log"}}]},
    {"text": "done"},
]
# Past both the 30 s lease and the 30 s heartbeat timeout of the call's activity.
RUNS_FOR_SECONDS = 40
RENEW_EVERY_SECONDS = 5


async def test_a_renewed_lease_keeps_a_long_call_with_its_device_and_its_first_attempt(
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
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, device_id=device_id, device_tools=["read_file"]
        )
        got = await http.post("/v1/device/calls/next", params={"wait": 20}, headers=auth)
        assert got.status_code == 200, got.text
        cid = got.json()["call_id"]
        for _ in range(RUNS_FOR_SECONDS // RENEW_EVERY_SECONDS):
            await asyncio.sleep(RENEW_EVERY_SECONDS)
            beat = await http.post(f"/v1/device/calls/{cid}/heartbeat", headers=auth)
            assert beat.status_code == 204, beat.text
            # Still this device's: a second poll (a second copy of the device) gets nothing.
            other = await http.post("/v1/device/calls/next", params={"wait": 0}, headers=auth)
            assert other.status_code == 204
        body = b"a long read"
        sha = hashlib.sha256(body).hexdigest()
        # The offer's upload URL ended with the lease it came with: a fresh one, as the
        # device link asks for, lives as long as the renewed lease.
        bound = await http.post(
            f"/v1/device/calls/{cid}/upload", json={"sha256": sha}, headers=auth
        )
        assert bound.status_code == 200, bound.text
        target = bound.json()
        put = await http.put(target["url"], content=body, headers=target["headers"])
        assert put.status_code == 200
        done = await http.post(
            f"/v1/device/calls/{cid}/complete",
            json={"result": {"size_bytes": len(body), "sha256": sha}},
            headers=auth,
        )
        assert done.status_code == 200 and done.json()["status"] == "committed", done.text
        result = await handle.result()
    assert result.status == "completed"
    async with resources.sessions() as db:
        repo = DeviceCallRepository(db, tenant, device_id)
        call = await repo.get(uuid.UUID(cid))
    assert call is not None and call.attempt == 1 and call.offers == 1
    (committed,) = [
        i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"
    ]
    assert committed.data["artifact"]["sha256"] == sha
