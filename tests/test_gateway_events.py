"""GET /v1/sessions/{id}/events over real HTTP (uvicorn on loopback): authenticated like
every route, each committed item once in order, status changes, and a reconnect with
Last-Event-ID that loses and repeats nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.gateway.app import create_app
from durable_agents.workers.gateway.serving import serving
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import GatewaySettings
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.gateway import bearer, make_key
from tests.support.helpers import items_of
from tests.support.sse import sse_events

SCRIPT = [
    {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]},
    {"text": "done"},
]


@pytest.fixture
async def gateway(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
) -> AsyncIterator[tuple[str, str]]:
    """(gateway URL, task queue) with a cloud worker behind it."""
    async with agent_worker(ScriptedProvider.from_data(SCRIPT), workspace) as queue:
        settings = migrated.settings(workspace=workspace, task_queue=queue, provider="scripted")
        settings.gateway = GatewaySettings(rate_per_second=1000, burst=1000)
        async with serving(create_app(resources, client, settings)) as url:
            yield url, queue


async def test_a_session_streams_every_item_once_and_resumes_after_last_event_id(
    gateway: tuple[str, str], resources: Resources, tenant: str
) -> None:
    url, _ = gateway
    key = await make_key(resources, tenant, "read", "start", "approve", user="ann")
    async with httpx.AsyncClient(base_url=url, headers=bearer(key), timeout=30) as http:
        started = await http.post("/v1/sessions", json={"text": "Survey the workspace."})
        assert started.status_code in (200, 201), started.text
        sid = started.json()["session_id"]
        seen: list[int] = []
        async with http.stream("GET", f"/v1/sessions/{sid}/events") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            async for event in sse_events(response):
                if event["event"] == "item":
                    seen.append(int(event["id"]))
                status = json.loads(event["data"]).get("status")
                if status == "waiting_approval":
                    break  # the connection drops here, mid-task
        inbox = (await http.get("/v1/approvals")).json()
        (entry,) = inbox["entries"]
        call = entry["pending"][0]["tool_call_id"]
        decided = await http.post(f"/v1/sessions/{sid}/calls/{call}/approve", json={})
        assert decided.status_code == 200, decided.text
        rest: list[int] = []
        statuses: list[str] = []
        headers = {"Last-Event-ID": str(seen[-1])}
        async with http.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            async for event in sse_events(response):
                if event["event"] == "item":
                    rest.append(int(event["id"]))
                elif event["event"] == "status":
                    statuses.append(json.loads(event["data"])["status"])
                elif event["event"] == "end":
                    break
    committed = [i.ordinal for i in await items_of(resources, tenant, sid)]
    assert seen + rest == committed == list(range(1, len(committed) + 1))
    assert statuses[-1] == "completed"


async def test_the_stream_is_authenticated_and_tenant_bound(
    gateway: tuple[str, str], resources: Resources, tenant: str
) -> None:
    url, _ = gateway
    owner = await make_key(resources, tenant, "read", "start")
    stranger = await make_key(resources, f"{tenant}-other", "read")
    starter = await make_key(resources, tenant, "start")
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        started = await http.post(
            "/v1/sessions", json={"text": "Survey the workspace."}, headers=bearer(owner)
        )
        sid = started.json()["session_id"]
        path = f"/v1/sessions/{sid}/events"
        assert (await http.get(path)).status_code == 401
        assert (await http.get(path, headers=bearer(starter))).status_code == 403
        assert (await http.get(path, headers=bearer(stranger))).status_code == 404
        bad = await http.get(path, headers={**bearer(owner), "Last-Event-ID": "x"})
        assert bad.status_code == 400 and "Last-Event-ID" in bad.json()["error"]["message"]
