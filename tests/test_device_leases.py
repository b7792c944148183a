"""A device's call is completed only under its current lease: not after the lease was
released or ran out (a heartbeat does not revive it), not under a lease that a newer offer
replaced. Upload URLs end with
the lease they came with; what a device writes to staging after a completion changes
nothing and is collected. A registration stores only the fields it defines."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.devices import DeviceRepository
from durable_agents.storage.gc import collect
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import GatewaySettings
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.device_gateway import make_device_key
from tests.support.gateway import bearer, gateway_server
from tests.support.helpers import items_of, start

READ_ON_DEVICE: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
    {"text": "done"},
]
REAL = b"what the file really says"


def _claim(body: bytes, **extra: Any) -> dict[str, Any]:
    sha = hashlib.sha256(body).hexdigest()
    result = {"size_bytes": len(body), "sha256": sha, "content_type": "text/plain"}
    return {"result": result, **extra}


@dataclass
class Device:
    http: httpx.AsyncClient
    auth: dict[str, str]
    device_id: str

    async def offer(self) -> dict[str, Any]:
        got = await self.http.post("/v1/device/calls/next", params={"wait": 20}, headers=self.auth)
        assert got.status_code == 200, got.text
        call: dict[str, Any] = got.json()
        return call

    async def complete(self, cid: str, body: dict[str, Any]) -> httpx.Response:
        return await self.http.post(
            f"/v1/device/calls/{cid}/complete", json=body, headers=self.auth
        )


@asynccontextmanager
async def _device(
    stack: StackEndpoints, res: Resources, client: Client, tenant: str, lease_seconds: int = 30
) -> AsyncIterator[Device]:
    device_id = f"laptop-{uuid.uuid4().hex[:6]}"
    auth = bearer(await make_device_key(res, tenant, device_id))
    settings = GatewaySettings(rate_per_second=1000, burst=1000, device_lease_seconds=lease_seconds)
    async with (
        gateway_server(
            stack, res, client, queue="unused", workspace=Path("unused"), gateway=settings
        ) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as http,
    ):
        registered = await http.post("/v1/device", json={"tools": ["read_file"]}, headers=auth)
        assert registered.status_code == 200, registered.text
        yield Device(http, auth, device_id)


async def _results(res: Resources, tenant: str, session_id: str) -> list[Any]:
    return [i for i in await items_of(res, tenant, session_id) if i.kind == "tool_result"]


async def _leased_again_and_committed(device: Any, cid: str, handle: Any) -> None:
    """The call a lease ran out on is offered again under lease 2, which completes it."""
    again = await device.offer()
    assert again["call_id"] == cid and again["lease"] == 2
    assert (await device.http.put(again["upload"]["url"], content=REAL)).status_code == 200
    done = await device.complete(cid, _claim(REAL, lease=2))
    assert done.status_code == 200 and done.json()["status"] == "committed", done.text
    assert (await handle.result()).status == "completed"


async def _staged(res: Resources, tenant: str, call_id: str) -> list[str]:
    """The call's objects in staging, whatever lease they were uploaded under."""
    prefix = f"{res.store.prefix}/{tenant}/device-uploads/{call_id}"
    listed = await res.store.client.list_objects_v2(Bucket=res.store.bucket, Prefix=prefix)
    return [obj["Key"] for obj in listed.get("Contents", [])]


async def test_a_completion_needs_the_current_lease(
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
        _device(migrated, resources, client, tenant) as device,
    ):
        session_id, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            device_id=device.device_id,
            device_tools=["read_file"],
        )
        first = await device.offer()
        cid = first["call_id"]
        # Refused (nothing uploaded yet): the lease is released, the call pending again.
        refused = await device.complete(cid, _claim(REAL))
        assert refused.status_code == 422, refused.text
        # The device uploads anyway with the URL it still holds, and completes: before,
        # this committed a result for a call it no longer held.
        put = await device.http.put(first["upload"]["url"], content=REAL)
        assert put.status_code == 200
        late = await device.complete(cid, _claim(REAL))
        assert late.status_code == 409 and late.json()["error"]["type"] == "not_leased", late.text
        assert await _results(resources, tenant, session_id) == []

        # Offered again: a completion naming the old lease is refused, the current one taken.
        again = await device.offer()
        assert first["lease"] == 1
        assert again["call_id"] == cid and again["lease"] == 2
        put = await device.http.put(again["upload"]["url"], content=REAL)
        assert put.status_code == 200
        stale = await device.complete(cid, _claim(REAL, lease=1))
        assert stale.status_code == 409, stale.text
        old_beat = await device.http.post(
            f"/v1/device/calls/{cid}/heartbeat", params={"lease": 1}, headers=device.auth
        )
        assert old_beat.status_code == 409, old_beat.text
        beat = await device.http.post(
            f"/v1/device/calls/{cid}/heartbeat", params={"lease": 2}, headers=device.auth
        )
        assert beat.status_code == 204, beat.text
        assert await _results(resources, tenant, session_id) == []
        done = await device.complete(cid, _claim(REAL, lease=2))
        assert done.status_code == 200 and done.json()["status"] == "committed", done.text
        assert (await handle.result()).status == "completed"
    (committed,) = await _results(resources, tenant, session_id)
    assert committed.data["artifact"]["sha256"] == hashlib.sha256(REAL).hexdigest()


async def test_a_lease_that_ran_out_completes_nothing_and_its_upload_url_ends_with_it(
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
        _device(migrated, resources, client, tenant, lease_seconds=3) as device,
    ):
        session_id, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            device_id=device.device_id,
            device_tools=["read_file"],
        )
        first = await device.offer()
        cid = first["call_id"]
        # An upload URL lives no longer than the lease it was given under.
        assert first["upload"]["expires_in"] <= 3
        assert (await device.http.put(first["upload"]["url"], content=REAL)).status_code == 200
        await asyncio.sleep(4)  # no heartbeat: the lease runs out
        expired = await device.http.put(first["upload"]["url"], content=REAL)
        assert expired.status_code == 403, expired.text
        late = await device.complete(cid, _claim(REAL))
        assert late.status_code == 409, late.text
        assert await _results(resources, tenant, session_id) == []
        # Still offered: the next poll leases it anew, and that lease completes it.
        await _leased_again_and_committed(device, cid, handle)


async def test_a_lease_that_ran_out_is_not_revived_by_a_heartbeat_nor_completed(
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
        _device(migrated, resources, client, tenant, lease_seconds=2) as device,
    ):
        session_id, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            device_id=device.device_id,
            device_tools=["read_file"],
        )
        first = await device.offer()
        cid = first["call_id"]
        assert (await device.http.put(first["upload"]["url"], content=REAL)).status_code == 200
        await asyncio.sleep(3)  # the lease runs out; nobody has leased the call since
        for lease in ({}, {"lease": 1}):
            beat = await device.http.post(
                f"/v1/device/calls/{cid}/heartbeat", params=lease, headers=device.auth
            )
            assert beat.status_code == 409, beat.text
            assert beat.json()["error"]["type"] == "not_leased"
        late = await device.complete(cid, _claim(REAL, lease=1))
        assert late.status_code == 409 and late.json()["error"]["type"] == "not_leased", late.text
        assert await _results(resources, tenant, session_id) == []
        # Still offered: the next poll leases it anew, and that lease completes it.
        await _leased_again_and_committed(device, cid, handle)
    assert len(await _results(resources, tenant, session_id)) == 1


async def test_a_write_to_staging_after_completion_changes_nothing_and_is_collected(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    provider = ScriptedProvider.from_data(READ_ON_DEVICE)
    store = resources.store
    async with (
        agent_worker(provider, workspace) as queue,
        _device(migrated, resources, client, tenant) as device,
    ):
        session_id, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            device_id=device.device_id,
            device_tools=["read_file"],
        )
        call = await device.offer()
        cid = call["call_id"]
        assert (await device.http.put(call["upload"]["url"], content=REAL)).status_code == 200
        (staging,) = await _staged(resources, tenant, cid)
        done = await device.complete(cid, _claim(REAL))
        assert done.status_code == 200, done.text
        assert await _staged(resources, tenant, cid) == []  # read once, then deleted
        assert (await handle.result()).status == "completed"
        # The URL has lease time left: S3 takes other bytes, which nothing ever reads.
        forged = b"written after the completion"
        assert (await device.http.put(call["upload"]["url"], content=forged)).status_code == 200
        twice = await device.complete(cid, _claim(forged))
        assert twice.status_code == 200 and twice.json()["status"] == "already_committed"
    (committed,) = await _results(resources, tenant, session_id)
    assert committed.data["artifact"]["sha256"] == hashlib.sha256(REAL).hexdigest()
    # The collector deletes what was left in staging (after its safety window).
    assert await _staged(resources, tenant, cid) == [staging]
    now = datetime.now(UTC)
    await collect(resources.sessions, store, now=now, window=timedelta(hours=1), tenant_id=tenant)
    assert await _staged(resources, tenant, cid) == [staging]  # younger than the window
    report = await collect(
        resources.sessions,
        store,
        now=datetime.now(UTC) + timedelta(seconds=5),
        window=timedelta(0),
        tenant_id=tenant,
    )
    assert await _staged(resources, tenant, cid) == []
    assert report.staging == [(staging, len(forged))]


async def test_a_registration_with_unknown_spec_fields_is_refused_and_not_stored(
    client: Client, resources: Resources, migrated: StackEndpoints, tenant: str
) -> None:
    spec = {
        "server": "notes",
        "mcp_name": "search",
        "description": "Search the notes.",
        "parameters": {"type": "object", "properties": {}},
        "effect": "read_only",
    }
    async with _device(migrated, resources, client, tenant) as device:
        for extra in ({"command": "/bin/sh"}, {"env": {"LD_PRELOAD": "/tmp/x.so"}}):
            body = {"tools": ["read_file"], "tool_specs": [{**spec, **extra}]}
            refused = await device.http.post("/v1/device", json=body, headers=device.auth)
            assert refused.status_code == 422, refused.text
            assert next(iter(extra)) in refused.json()["error"]["message"]
        async with resources.sessions() as db:
            row = await DeviceRepository(db, tenant).get(device.device_id)
        assert row is not None and row.tool_specs is None
        body = {"tools": ["read_file"], "tool_specs": [spec]}
        stored = await device.http.post("/v1/device", json=body, headers=device.auth)
        assert stored.status_code == 200, stored.text
        async with resources.sessions() as db:
            row = await DeviceRepository(db, tenant).get(device.device_id)
        assert row is not None and row.tool_specs == [spec]
