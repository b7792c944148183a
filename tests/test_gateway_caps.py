"""What one key or one client address may hold of a gateway process: a capped number of
open event streams and device long-polls per key (429 with Retry-After past it, freed when
one closes), and a capped run of failed authentications per client address (429 before any
key is looked up, valid or not; other addresses unaffected)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.gateway.app import create_app
from durable_agents.workers.gateway.rate_limit import RateLimiter
from durable_agents.workers.gateway.serving import serving
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import GatewaySettings
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.device_gateway import make_device_key
from tests.support.gateway import bearer, make_key, poll

SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]},
    {"text": "done"},
]
CAPS = GatewaySettings(rate_per_second=1000, burst=1000, max_streams_per_key=2, max_polls_per_key=1)


def _assert_capped(answer: httpx.Response, what: str) -> None:
    assert answer.status_code == 429, answer.text
    assert int(answer.headers["Retry-After"]) >= 1
    error = answer.json()["error"]
    assert error["type"] == "too_many_open" and what in error["message"], error


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
        settings.gateway = CAPS
        async with serving(create_app(resources, client, settings)) as url:
            yield url


async def test_a_key_holds_at_most_its_cap_of_open_streams(
    gateway: str, resources: Resources, tenant: str
) -> None:
    key = await make_key(resources, tenant, "read", "start")
    other = await make_key(resources, tenant, "read")
    async with httpx.AsyncClient(base_url=gateway, headers=bearer(key), timeout=30) as http:
        started = await http.post("/v1/sessions", json={"text": "Write a.txt."})
        path = f"/v1/sessions/{started.json()['session_id']}/events"
        first = await http.send(http.build_request("GET", path), stream=True)
        second = await http.send(http.build_request("GET", path), stream=True)
        try:
            assert first.status_code == second.status_code == 200
            # Before: a third, and a thousandth, stream of the same key was served.
            third = await http.send(http.build_request("GET", path), stream=True)
            try:
                assert third.status_code == 429
                await third.aread()
            finally:
                await third.aclose()
            _assert_capped(third, "event streams")
            # Per key: another key of the tenant still gets one.
            async with http.stream("GET", path, headers=bearer(other)) as theirs:
                assert theirs.status_code == 200
        finally:
            await first.aclose()

        # A closed stream frees its place (once the server sees the client gone).
        async def reopen() -> httpx.Response:
            answer = await http.send(http.build_request("GET", path), stream=True)
            if answer.status_code != 200:
                await answer.aclose()
            return answer

        reopened = await poll(reopen, lambda a: a.status_code == 200, within_seconds=10)
        await reopened.aclose()
        await second.aclose()


async def test_a_device_key_holds_at_most_its_cap_of_long_polls(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str
) -> None:
    key = await make_device_key(resources, tenant, "laptop-caps")
    settings = migrated.settings(workspace=Path("unused"), task_queue="unused", provider="scripted")
    settings.gateway = CAPS
    async with (
        serving(create_app(resources, client, settings)) as url,
        httpx.AsyncClient(base_url=url, headers=bearer(key), timeout=30) as http,
    ):
        assert (await http.post("/v1/device", json={"tools": ["read_file"]})).status_code == 200
        waiting = asyncio.create_task(http.post("/v1/device/calls/next", params={"wait": 3}))
        await asyncio.sleep(0.5)
        _assert_capped(
            await http.post("/v1/device/calls/next", params={"wait": 3}), "device long-polls"
        )
        assert (await waiting).status_code == 204
        # Its place is free again once it answered.
        assert (await http.post("/v1/device/calls/next", params={"wait": 0})).status_code == 204


async def test_failed_authentications_are_throttled_per_client_address(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str
) -> None:
    key = await make_key(resources, tenant, "read")
    settings = migrated.settings(workspace=Path("unused"), task_queue="unused", provider="scripted")
    settings.gateway = GatewaySettings(
        rate_per_second=1000, burst=1000, auth_failure_burst=5, auth_failure_rate_per_second=0.01
    )
    app = create_app(resources, client, settings)

    def from_address(address: str) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=app, client=(address, 40000))
        return httpx.AsyncClient(transport=transport, base_url="http://gateway")

    guesses = [f"da_{'0' * 16}_{'x' * 43}", "not-a-key", f"{key[:-4]}AAAA"]
    async with from_address("203.0.113.7") as guesser, from_address("198.51.100.2") as other:
        for i in range(5):
            wrong = await guesser.get("/v1/sessions", headers=bearer(guesses[i % 3]))
            assert wrong.status_code == 401, wrong.text
        # Before: every guess was looked up and answered 401, without end.
        throttled = await guesser.get("/v1/sessions", headers=bearer(guesses[0]))
        assert throttled.status_code == 429, throttled.text
        assert int(throttled.headers["Retry-After"]) >= 1
        assert throttled.json()["error"]["type"] == "auth_throttled"
        # Even a valid key, from there: a throttled address learns nothing about keys.
        assert (await guesser.get("/v1/sessions", headers=bearer(key))).status_code == 429
        # Another address is not affected, and a request without a key counts for nothing.
        assert (await other.get("/v1/sessions", headers=bearer(key))).status_code == 200
        for _ in range(10):
            assert (await other.get("/v1/sessions")).status_code == 401
        assert (await other.get("/v1/sessions", headers=bearer(key))).status_code == 200
        body = json.dumps(throttled.json())
        assert key not in body


def test_remembered_addresses_are_bounded() -> None:
    now = [0.0]
    limiter = RateLimiter(1.0, 3, clock=lambda: now[0], max_keys=100)
    addresses = [f"10.0.{i // 256}.{i % 256}" for i in range(1000)]
    for address in addresses:
        limiter.take(address)
    # The oldest was forgotten (a full burst of 3 again); the newest is remembered (2 left).
    assert [limiter.take(addresses[0]) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert [limiter.take(addresses[-1]) for _ in range(3)][-1] > 0
