"""Token deltas end to end, over real HTTP: the OpenAI-compatible provider streams from a fake
Chat Completions server, the cloud worker publishes each piece, the gateway's SSE stream
sends it as `event: delta` (no id). A model call retried after its stream dropped shows
the client both attempts, and the committed item is still the record, sent once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider
from durable_agents.workers.gateway.app import create_app
from durable_agents.workers.gateway.serving import serving
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import GatewaySettings
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.fake_openai import (
    FakeOpenAI,
    fake_openai_server,  # noqa: F401 (the `server` fixture)
    says,
    text_pieces,
)
from tests.support.gateway import bearer, make_key
from tests.support.helpers import items_of
from tests.support.sse import sse_events

REPLY = "The answer is forty two, and here is the reason why it matters to you."
# The first request's stream drops after its role chunk and three words.
DROPPED_AFTER = 4


@pytest.fixture
async def provider(server: FakeOpenAI) -> AsyncIterator[OpenAICompatibleProvider]:
    p = OpenAICompatibleProvider(server.url, None, "gpt-fake", timeout=10)
    yield p
    await p.aclose()


async def _session_events(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    queue: str,
    workspace: Path,
    tenant: str,
    server: FakeOpenAI,
) -> tuple[str, list[dict[str, Any]]]:
    """Start a task through the gateway and read its stream to the end; the model server
    answers only once the stream is followed, so no delta can come before it."""
    settings = migrated.settings(workspace=workspace, task_queue=queue, provider="scripted")
    settings.gateway = GatewaySettings(rate_per_second=1000, burst=1000)
    key = await make_key(resources, tenant, "read", "start")
    events: list[dict[str, Any]] = []
    async with (
        serving(create_app(resources, client, settings)) as url,
        httpx.AsyncClient(base_url=url, headers=bearer(key), timeout=60) as http,
    ):
        started = await http.post("/v1/sessions", json={"text": "What is the answer?"})
        assert started.status_code in (200, 201), started.text
        sid = started.json()["session_id"]
        async with (
            asyncio.timeout(60),
            http.stream("GET", f"/v1/sessions/{sid}/events") as response,
        ):
            async for event in sse_events(response):
                events.append(event)
                assert server.hold is not None
                server.hold.set()  # the first event: the stream follows the session
                if event["event"] == "end":
                    break
    return sid, events


async def test_deltas_of_a_retried_model_call_show_both_attempts_and_the_item_once(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    server: FakeOpenAI,
    provider: OpenAICompatibleProvider,
) -> None:
    server.reply = says(REPLY)
    server.drop_after = {0: DROPPED_AFTER}
    server.hold = asyncio.Event()
    async with agent_worker(provider, workspace) as queue:
        sid, events = await _session_events(
            migrated, resources, client, queue, workspace, tenant, server
        )
    assert len(server.requests) == 2  # the dropped attempt and its retry
    assert all(r.body["stream"] is True for r in server.requests)

    deltas = [json.loads(e["data"]) for e in events if e["event"] == "delta"]
    assert all("id" not in e for e in events if e["event"] == "delta")
    first = [d for d in deltas if d["attempt"] == 1]
    second = [d for d in deltas if d["attempt"] == 2]
    assert deltas == first + second  # the retry's deltas come after the dropped ones
    for attempt in (first, second):
        assert [d["seq"] for d in attempt] == list(range(len(attempt)))
        assert {(d["step"], d["send"]) for d in attempt} == {(0, 0)}
    assert "".join(d["text"] for d in first) == "".join(text_pieces(REPLY)[: DROPPED_AFTER - 1])
    assert "".join(d["text"] for d in second) == REPLY

    committed = await items_of(resources, tenant, sid)
    (answer,) = [i for i in committed if i.kind == "assistant_message"]
    assert answer.text == REPLY and answer.data["step"] == 0
    item_events = [e for e in events if e["event"] == "item"]
    assert [int(e["id"]) for e in item_events] == [i.ordinal for i in committed]
    # Every delta of the step came before the item that replaces them.
    last_delta = max(n for n, e in enumerate(events) if e["event"] == "delta")
    answer_at = next(n for n, e in enumerate(events) if e.get("id") == str(answer.ordinal))
    assert last_delta < answer_at


async def test_with_streaming_off_the_model_is_asked_whole_and_no_delta_is_sent(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    server: FakeOpenAI,
    provider: OpenAICompatibleProvider,
) -> None:
    server.reply = says(REPLY)
    server.hold = asyncio.Event()
    async with agent_worker(provider, workspace, stream=False) as queue:
        sid, events = await _session_events(
            migrated, resources, client, queue, workspace, tenant, server
        )
    assert [r.body.get("stream") for r in server.requests] == [None]
    assert not [e for e in events if e["event"] == "delta"]
    (answer,) = [i for i in await items_of(resources, tenant, sid) if i.role == "assistant"]
    assert answer.text == REPLY
