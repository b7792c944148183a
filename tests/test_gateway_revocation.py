"""A key checked once at the door is checked again while its request stays open: revoking
a key, or its expiry, ends its open event streams and device long-polls within 5 s (a
stream gets an `error` event, never `end`; a reconnect, 401)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.api_keys import ApiKeyRepository, parse_key
from durable_agents.workers.gateway.app import create_app
from durable_agents.workers.gateway.serving import serving
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import GatewaySettings
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.device_gateway import device_link
from tests.support.gateway import bearer, make_key
from tests.support.sse import sse_events

# A write waits for approval: the session, and its stream, stay open until decided.
SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]},
    {"text": "done"},
]
ENDS_WITHIN_SECONDS = 5.0


@pytest.fixture
async def gateway(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
) -> AsyncIterator[str]:
    async with agent_worker(ScriptedProvider.from_data(SCRIPT), workspace) as queue:
        settings = migrated.settings(workspace=workspace, task_queue=queue, provider="scripted")
        settings.gateway = GatewaySettings(rate_per_second=1000, burst=1000)
        async with serving(create_app(resources, client, settings)) as url:
            yield url


async def _revoke(resources: Resources, key: str) -> None:
    parsed = parse_key(key)
    assert parsed is not None
    async with resources.sessions() as db, db.begin():
        assert await ApiKeyRepository(db).revoke(parsed[0])


async def _rest(events: AsyncIterator[dict[str, Any]], within: float) -> list[dict[str, Any]]:
    """The events until the server closes the stream (TimeoutError if it does not)."""
    async with asyncio.timeout(within):
        return [event async for event in events]


async def _until_waiting(events: AsyncIterator[dict[str, Any]]) -> None:
    """Until the stream has shown the waiting status and the call it waits on: items and
    statuses reach it through separate notifications, so either may come first."""
    waiting = called = False
    async with asyncio.timeout(60):
        while not (waiting and called):
            event = await anext(events)
            data = json.loads(event["data"])
            waiting = waiting or (
                event["event"] == "status" and data.get("status") == "waiting_approval"
            )
            called = called or (event["event"] == "item" and data.get("kind") == "tool_call")


async def test_a_revoked_keys_open_stream_ends_within_5_s(
    gateway: str, resources: Resources, tenant: str
) -> None:
    key = await make_key(resources, tenant, "read", "start")
    async with httpx.AsyncClient(base_url=gateway, headers=bearer(key), timeout=30) as http:
        started = await http.post("/v1/sessions", json={"text": "Write a.txt."})
        assert started.status_code in (200, 201), started.text
        path = f"/v1/sessions/{started.json()['session_id']}/events"
        async with http.stream("GET", path) as response:
            assert response.status_code == 200
            events = sse_events(response)
            await _until_waiting(events)
            await _revoke(resources, key)
            revoked_at = time.monotonic()
            # Before: the stream went on (heartbeats, and every later event) for good.
            rest = await _rest(events, within=3 * ENDS_WITHIN_SECONDS)
            ended_after = time.monotonic() - revoked_at
        assert ended_after < ENDS_WITHIN_SECONDS, ended_after
        assert [e["event"] for e in rest] == ["error"]
        assert json.loads(rest[0]["data"])["type"] == "unauthorized"
        again = await http.get(path)
        assert again.status_code == 401
    print(f"stream ended {ended_after:.2f} s after the revocation")


async def test_an_expiring_keys_open_stream_ends_within_5_s_of_its_expiry(
    gateway: str, resources: Resources, tenant: str
) -> None:
    expires_at = datetime.now(UTC) + timedelta(seconds=6)
    key = await make_key(resources, tenant, "read", "start", expires_at=expires_at)
    async with httpx.AsyncClient(base_url=gateway, headers=bearer(key), timeout=30) as http:
        started = await http.post("/v1/sessions", json={"text": "Write a.txt."})
        assert started.status_code in (200, 201), started.text
        path = f"/v1/sessions/{started.json()['session_id']}/events"
        async with http.stream("GET", path) as response:
            assert response.status_code == 200
            rest = await _rest(sse_events(response), within=6 + 3 * ENDS_WITHIN_SECONDS)
            ended_at = datetime.now(UTC)
    after_expiry = (ended_at - expires_at).total_seconds()
    assert -0.5 < after_expiry < ENDS_WITHIN_SECONDS, after_expiry
    assert rest[-1]["event"] == "error" and "end" not in [e["event"] for e in rest]
    print(f"stream ended {after_expiry:.2f} s after the key expired")


async def test_a_device_long_poll_ends_within_5_s_of_revocation_or_expiry(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str
) -> None:
    async with device_link(migrated, resources, client, tenant, ["read_file"]) as device:
        poll = asyncio.create_task(
            device.http.post("/v1/device/calls/next", params={"wait": 30}, headers=device.auth)
        )
        await asyncio.sleep(0.5)  # the poll waits: nothing is offered to this device
        assert not poll.done()
        await _revoke(resources, device.auth["Authorization"].removeprefix("Bearer "))
        revoked_at = time.monotonic()
        # Before: it waited its 30 s out and answered 204.
        answer = await poll
        ended_after = time.monotonic() - revoked_at
        assert answer.status_code == 401, answer.text
        assert ended_after < ENDS_WITHIN_SECONDS, ended_after
        print(f"long-poll ended {ended_after:.2f} s after the revocation")

        # A key that expires mid-poll: likewise.
        async with resources.sessions() as db, db.begin():
            expiring = await ApiKeyRepository(db).create_device_key(
                tenant, device.device_id, expires_at=datetime.now(UTC) + timedelta(seconds=2)
            )
        started = time.monotonic()
        answer = await device.http.post(
            "/v1/device/calls/next", params={"wait": 30}, headers=bearer(expiring.key)
        )
        assert answer.status_code == 401, answer.text
        assert time.monotonic() - started < 2 + ENDS_WITHIN_SECONDS
