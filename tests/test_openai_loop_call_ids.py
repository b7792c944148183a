"""The whole loop against a fake OpenAI-compatible server that misbehaves with call ids."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client

from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support.fake_openai import (
    FakeOpenAI,
    fake_openai_server,  # noqa: F401 (the `server` fixture)
    tool_call_reply,
)
from tests.support.helpers import session_root, start


@pytest.fixture
async def provider(server: FakeOpenAI) -> AsyncIterator[OpenAICompatibleProvider]:
    p = OpenAICompatibleProvider(base_url=server.url, api_key="sk-test", model="gpt-x", timeout=5)
    yield p
    await p.aclose()


async def test_the_loop_sends_the_server_its_own_call_ids_back(
    server: FakeOpenAI,
    provider: OpenAICompatibleProvider,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    """A server that reuses an id across steps and omits one: every call runs and the
    conversation it is sent back is one it accepts, in its own ids where they are usable."""
    server.queued = [
        tool_call_reply('{"path": "a.txt"}', '{"path": "b.txt"}', ids=("call_0", None)),
        tool_call_reply('{"path": "a.txt"}', ids=("call_0",)),
    ]
    sid = uuid.uuid4()
    root = session_root(workspace, tenant, sid)
    (root / "a.txt").write_text("contents of A")
    (root / "b.txt").write_text("contents of B")
    async with agent_worker(provider, workspace) as queue:
        _, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        result = await asyncio.wait_for(handle.result(), 60)

    assert result.status == "completed"
    bodies = [r.body["messages"] for r in server.requests]
    assert len(bodies) == 3
    second = bodies[1]
    assert [c["id"] for c in second[-3]["tool_calls"]] == ["call_0", "call_0_1"]
    assert [m["tool_call_id"] for m in second[-2:]] == ["call_0", "call_0_1"]
    last = bodies[2]
    asked = [c["id"] for m in last if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    answered = [m["tool_call_id"] for m in last if m["role"] == "tool"]
    # The reused id is the server's where first used; later ours stands in for it.
    assert asked == answered == ["call_0", "call_0_1", "call_1_0"]
    told = [m["content"] for m in last if m["role"] == "tool"]
    assert "contents of A" in told[0] and "contents of B" in told[1] and "contents of A" in told[2]
