"""A session's live events from LISTEN/NOTIFY: every committed item once, in order, as it
commits; status changes; resuming after a dropped stream loses and repeats nothing."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.errors import SessionNotFound
from durable_agents.storage.listener import Listener
from durable_agents.storage.session_events import EventHub, listen_dsn, parse
from durable_agents.workers.gateway.events import cursor_of, session_events
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.helpers import items_of, start, wait_for_pending

# Never rechecked by time in these tests: every event must come from a notification.
NO_RECHECK = 3600.0
SCRIPT = [
    {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]},
    {"text": "done"},
]


@pytest.fixture
async def hub(migrated: StackEndpoints) -> AsyncIterator[EventHub]:
    listener = Listener(listen_dsn(migrated.database_url))
    events = EventHub(listener)
    async with listener:
        yield events


def _items(events: list[dict[str, Any]]) -> list[int]:
    return [int(e["id"]) for e in events if e["event"] == "item"]


async def test_every_item_arrives_once_in_order_as_it_commits_with_status_changes(
    hub: EventHub,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    async with agent_worker(ScriptedProvider.from_data(SCRIPT), workspace) as queue:
        sid, handle = await start(client, resources, queue, tenant=tenant)
        events: list[dict[str, Any]] = []
        stream = session_events(hub, resources.sessions, tenant, sid, recheck_seconds=NO_RECHECK)
        async with asyncio.timeout(60):
            async for event in stream:
                events.append(event)
                # The task waits for this decision: it is made on what the stream said.
                if json.loads(event["data"]).get("status") == "waiting_approval":
                    (call,) = await wait_for_pending(client, sid)
                    await verbs.approve(
                        client, sid, call, "me", sessions=resources.sessions, tenant_id=tenant
                    )
        await asyncio.wait_for(handle.result(), 60)
    committed = [i.ordinal for i in await items_of(resources, tenant, sid)]
    assert _items(events) == committed == list(range(1, len(committed) + 1))
    statuses = [json.loads(e["data"])["status"] for e in events if e["event"] == "status"]
    assert statuses[-1] == "completed" and "waiting_approval" in statuses
    assert events[-1]["event"] == "end"
    first = json.loads(next(e["data"] for e in events if e["event"] == "item"))
    assert (first["kind"], first["ordinal"]) == ("user_message", 1)
    assert hub.notifications > 0 and hub.followers() == 0


async def test_a_dropped_stream_resumes_after_its_last_event_id_with_nothing_lost_or_repeated(
    hub: EventHub,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    async with agent_worker(ScriptedProvider.from_data(SCRIPT), workspace) as queue:
        sid, handle = await start(client, resources, queue, tenant=tenant)
        (call,) = await wait_for_pending(client, sid)
        seen: list[int] = []
        async for event in session_events(hub, resources.sessions, tenant, sid):
            if event["event"] == "item":
                seen.append(int(event["id"]))
                if len(seen) == 2:
                    break  # the connection drops here
        await verbs.approve(client, sid, call, "me", sessions=resources.sessions, tenant_id=tenant)
        await asyncio.wait_for(handle.result(), 60)
        resumed = [
            int(e["id"])
            async for e in session_events(
                hub, resources.sessions, tenant, sid, cursor_of(str(seen[-1]), 0)
            )
            if e["event"] == "item"
        ]
    committed = [i.ordinal for i in await items_of(resources, tenant, sid)]
    assert seen + resumed == committed


async def test_another_tenant_s_session_is_not_found_before_any_event(
    hub: EventHub, resources: Resources, client: Client, agent_worker: AgentRunner, workspace: Path
) -> None:
    async with agent_worker(ScriptedProvider.from_data([{"text": "hi"}]), workspace) as queue:
        sid, handle = await start(client, resources, queue, tenant="owner-tenant")
        await asyncio.wait_for(handle.result(), 60)
    with pytest.raises(SessionNotFound):
        await anext(session_events(hub, resources.sessions, "someone-else", sid))
    with pytest.raises(SessionNotFound):
        await anext(session_events(hub, resources.sessions, "owner-tenant", str(uuid.uuid4())))


def test_cursors_and_payloads_are_checked() -> None:
    assert cursor_of(None, 3) == 3 and cursor_of("7", 0) == 7 and cursor_of(" ", 2) == 2
    for bad in ("x", "-1", str(2**63), "9" * 5000):
        with pytest.raises(ValueError):
            cursor_of(bad, 0)
    assert parse('{"t": "a", "s": "b", "o": 3}') is not None
    assert parse("not json") is None and parse('{"t": "a"}') is None
