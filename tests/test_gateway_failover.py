"""Two real `agentctl gateway` processes; one is SIGKILLed mid-stream. Its event-stream
client resumes on the other with Last-Event-ID and gets every committed item once, in
order; the device call leased through it is offered again by the other once the lease
runs out, and its result commits once (a completion under the dead lease is refused)."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.api_keys import ApiKeyRepository
from durable_agents.storage.device_calls import DeviceCallRepository
from durable_agents.storage.items import ItemRepository, NewItem
from durable_agents.storage.sessions import SessionRepository
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.device_gateway import make_device_key
from tests.support.gateway import bearer
from tests.support.gateway_process import GatewayProcess
from tests.support.helpers import items_of, start
from tests.support.sse import sse_events

ITEMS = 40
KILL_AFTER = 10
LEASE_SECONDS = 3
BODY = b"read on the device"
READ_ON_DEVICE: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
    {"text": "done"},
]


async def _commit_items(res: Resources, tenant: str, sid: uuid.UUID) -> None:
    """Items committed at ~20/s while the stream is read, then the session ends."""
    for n in range(ITEMS):
        async with res.sessions() as db, db.begin():
            await ItemRepository(db, tenant).append(
                NewItem(sid, ItemKind.USER_MESSAGE, "user", f"failover:{sid}:{n}", text=f"m{n}")
            )
        await asyncio.sleep(0.05)
    async with res.sessions() as db, db.begin():
        await SessionRepository(db, tenant).set_status(sid, SessionStatus.COMPLETED)


async def _follow(
    urls: list[str], key: str, sid: uuid.UUID, killed: asyncio.Event, seen: list[int]
) -> int:
    """Read the stream from the first gateway; when it breaks, resume on the next with
    Last-Event-ID. The number of connections it took."""
    headers = bearer(key)
    connections = 0
    for url in urls:
        if seen:
            headers["Last-Event-ID"] = str(seen[-1])
        connections += 1
        try:
            async with (
                httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(30, read=60)) as http,
                http.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response,
            ):
                assert response.status_code == 200
                async for event in sse_events(response):
                    if event.get("event") == "item":
                        seen.append(int(event["id"]))
                        if len(seen) == KILL_AFTER:
                            killed.set()
                    elif event.get("event") == "end":
                        return connections
        except httpx.TransportError:
            continue  # its gateway died mid-stream: on to the next
    raise AssertionError(f"the stream did not end; seen {seen}")


async def test_a_killed_gateway_s_streams_and_leased_calls_go_on_through_the_other(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    tmp_path: Path,
) -> None:
    env = {
        **migrated.env(),
        "AGENT_TENANT_ID": "nobody",
        "GATEWAY_RATE_PER_SECOND": "1000",
        "GATEWAY_BURST": "1000",
        "GATEWAY_DEVICE_LEASE_SECONDS": str(LEASE_SECONDS),
    }
    doomed = GatewayProcess(env, tmp_path / "gateway-a.log")
    survivor = GatewayProcess(env, tmp_path / "gateway-b.log")
    sid = uuid.uuid4()
    device_id = f"laptop-{uuid.uuid4().hex[:6]}"
    async with resources.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="failover", model_config={})
        await SessionRepository(db, tenant).set_status(sid, SessionStatus.RUNNING)
        reader = (await ApiKeyRepository(db).create(tenant, "ann", ["read"])).key
    device = bearer(await make_device_key(resources, tenant, device_id))
    provider = ScriptedProvider.from_data(READ_ON_DEVICE)
    try:
        await asyncio.gather(doomed.start(), survivor.start())
        async with (
            agent_worker(provider, workspace) as queue,
            httpx.AsyncClient(base_url=doomed.url, timeout=30) as on_a,
            httpx.AsyncClient(base_url=survivor.url, timeout=30) as on_b,
        ):
            assert (
                await on_a.post("/v1/device", json={"tools": ["read_file"]}, headers=device)
            ).status_code == 200
            task_sid, handle = await start(
                client,
                resources,
                queue,
                tenant=tenant,
                device_id=device_id,
                device_tools=["read_file"],
            )
            first = await on_a.post("/v1/device/calls/next", params={"wait": 20}, headers=device)
            assert first.status_code == 200, first.text
            leased = first.json()

            killed, seen = asyncio.Event(), list[int]()
            follower = asyncio.create_task(
                _follow([doomed.url, survivor.url], reader, sid, killed, seen)
            )
            writer = asyncio.create_task(_commit_items(resources, tenant, sid))
            await asyncio.wait_for(killed.wait(), 30)
            await doomed.kill()  # mid-stream, with the device's call leased through it

            # The device turns to the other gateway: the call comes back once its lease ran out.
            again = await on_b.post("/v1/device/calls/next", params={"wait": 20}, headers=device)
            assert again.status_code == 200, again.text
            offered = again.json()
            assert offered["call_id"] == leased["call_id"] and offered["offered_before"]
            assert offered["lease"] == leased["lease"] + 1
            put = await on_b.put(offered["upload"]["url"], content=BODY)
            assert put.status_code == 200, put.text
            claim = {
                "size_bytes": len(BODY),
                "sha256": hashlib.sha256(BODY).hexdigest(),
                "content_type": "text/plain",
            }
            cid = offered["call_id"]
            stale = await on_b.post(
                f"/v1/device/calls/{cid}/complete",
                json={"result": claim, "lease": leased["lease"]},
                headers=device,
            )
            assert stale.status_code == 409, stale.text
            done = await on_b.post(
                f"/v1/device/calls/{cid}/complete",
                json={"result": claim, "lease": offered["lease"]},
                headers=device,
            )
            assert done.json()["status"] == "committed", done.text
            again_done = await on_b.post(
                f"/v1/device/calls/{cid}/complete",
                json={"result": claim, "lease": offered["lease"]},
                headers=device,
            )
            assert again_done.json()["status"] == "already_committed", again_done.text
            result = await asyncio.wait_for(handle.result(), 60)

            await writer
            connections = await asyncio.wait_for(follower, 60)
    finally:
        await doomed.kill()
        await survivor.stop()
    assert connections == 2, "the stream should have broken once, with its gateway"
    assert seen == list(range(1, ITEMS + 1)), seen  # nothing lost, nothing repeated
    assert result.status == "completed"
    results = [i for i in await items_of(resources, tenant, task_sid) if i.kind == "tool_result"]
    assert len(results) == 1
    assert results[0].data["artifact"]["sha256"] == hashlib.sha256(BODY).hexdigest()
    async with resources.sessions() as db:
        assert await DeviceCallRepository(db, tenant, device_id).waiting() == []
