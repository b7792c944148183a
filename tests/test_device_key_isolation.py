"""A device key reaches its own device's calls and nothing else: not another tenant's
device of the same id, not another device of its own tenant, and no tenant route; a
tenant key (even admin) reaches no device route. Over real HTTP, with a real task."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.device_gateway import gateway_server, make_device_key
from tests.support.gateway import bearer, make_key
from tests.support.helpers import items_of, start

READ_ON_DEVICE = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
    {"text": "done"},
]


async def _register(http: httpx.AsyncClient, key: str) -> None:
    answer = await http.post("/v1/device", json={"tools": ["read_file"]}, headers=bearer(key))
    assert answer.status_code == 200, answer.text


async def _next(http: httpx.AsyncClient, key: str, wait: float = 2) -> httpx.Response:
    return await http.post("/v1/device/calls/next", params={"wait": wait}, headers=bearer(key))


def _completion(body: bytes) -> dict[str, Any]:
    sha = hashlib.sha256(body).hexdigest()
    return {"result": {"size_bytes": len(body), "sha256": sha, "content_type": "text/plain"}}


async def test_a_device_key_gets_completes_and_renews_only_its_own_device_s_calls(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    other_tenant = f"t-{uuid.uuid4().hex[:10]}"
    device_id = f"laptop-{uuid.uuid4().hex[:6]}"
    mine = await make_device_key(resources, tenant, device_id)
    same_id_elsewhere = await make_device_key(resources, other_tenant, device_id)
    sibling = await make_device_key(resources, tenant, f"phone-{uuid.uuid4().hex[:6]}")
    admin = await make_key(resources, tenant, "admin")
    provider = ScriptedProvider.from_data(READ_ON_DEVICE)
    async with (
        agent_worker(provider, workspace) as queue,
        gateway_server(migrated, resources, client) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as http,
    ):
        for key in (mine, same_id_elsewhere, sibling):
            await _register(http, key)
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, device_id=device_id, device_tools=["read_file"]
        )
        offered = await _next(http, mine, wait=20)
        assert offered.status_code == 200, offered.text
        call = offered.json()
        assert call["tool"] == "read_file" and call["arguments"] == {"path": "notes.txt"}
        cid = call["call_id"]
        # Completed before anything was uploaded: refused, so the call is pending again.
        early = await http.post(
            f"/v1/device/calls/{cid}/complete", json=_completion(b"x"), headers=bearer(mine)
        )
        assert early.status_code == 422, early.text
        # A pending call: neither the same device id of another tenant nor another device
        # of this tenant is handed it.
        assert (await _next(http, same_id_elsewhere)).status_code == 204
        assert (await _next(http, sibling)).status_code == 204
        again = await _next(http, mine, wait=20)
        assert again.status_code == 200 and again.json()["call_id"] == cid
        body = b"the device's answer"
        put = await http.put(again.json()["upload"]["url"], content=body)
        assert put.status_code == 200, put.text

        for stranger in (same_id_elsewhere, sibling):
            done = await http.post(
                f"/v1/device/calls/{cid}/complete", json=_completion(body), headers=bearer(stranger)
            )
            assert done.status_code == 404, done.text
            beat = await http.post(f"/v1/device/calls/{cid}/heartbeat", headers=bearer(stranger))
            assert beat.status_code == 404, beat.text
        assert not [
            i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"
        ]

        # A device key opens no tenant route; a tenant key, even admin, no device route.
        assert (await http.get("/v1/sessions", headers=bearer(mine))).status_code == 403
        assert (
            await http.get(f"/v1/sessions/{session_id}", headers=bearer(mine))
        ).status_code == 403
        assert (await _next(http, admin)).status_code == 403
        assert (await http.get("/v1/device", headers=bearer(admin))).status_code == 403

        beat = await http.post(f"/v1/device/calls/{cid}/heartbeat", headers=bearer(mine))
        assert beat.status_code == 204, beat.text
        done = await http.post(
            f"/v1/device/calls/{cid}/complete", json=_completion(body), headers=bearer(mine)
        )
        assert done.status_code == 200 and done.json()["status"] == "committed", done.text
        result = await handle.result()
    assert result.status == "completed"
    (committed,) = [
        i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"
    ]
    assert committed.data["artifact"]["sha256"] == hashlib.sha256(body).hexdigest()
