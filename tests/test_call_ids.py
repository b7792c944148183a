"""Call ids belong to us: unique per session (`call_{step}_{index}`) whatever ids the model
sends, and the provider's own id only echoed back to the provider."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client

from durable_agents.activities.providers.base import ChatMessage, ModelRequest
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.helpers import items_of, session_root, start, wait_for_pending


def _read(path: str, call_id: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"name": "read_file", "arguments": {"path": path}}
    return call if call_id is None else {**call, "id": call_id}


def _write(path: str, call_id: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": path, "content": path}, "id": call_id}


async def _seeded(workspace: Path, tenant: str) -> uuid.UUID:
    sid = uuid.uuid4()
    root = session_root(workspace, tenant, sid)
    (root / "a.txt").write_text("contents of A")
    (root / "b.txt").write_text("contents of B")
    return sid


def _tool_messages(request: ModelRequest) -> list[ChatMessage]:
    return [m for m in request.messages if m.role == "tool"]


def _assert_consistent(request: ModelRequest) -> None:
    """What a provider accepts: every call id unique, each result answering a call of the
    assistant message just before it."""
    ids = [c.id for m in request.messages for c in m.tool_calls]
    assert all(ids) and len(ids) == len(set(ids)), ids
    asked: set[str] = set()
    for m in request.messages:
        if m.role == "assistant":
            asked = {c.id for c in m.tool_calls}
        elif m.role == "tool":
            assert m.tool_call_id in asked, (m.tool_call_id, asked)


async def test_an_id_reused_at_every_step_runs_each_steps_own_call_and_approval(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data(
        [
            {"tool_calls": [_read("a.txt", "call_0")]},
            {"tool_calls": [_read("b.txt", "call_0")]},
            {"tool_calls": [_write("out/one.md", "call_0")]},
            {"tool_calls": [_write("out/two.md", "call_0")]},
        ]
    )
    sid = await _seeded(workspace, tenant)
    ours: dict[str, Any] = {"sessions": resources.sessions, "tenant_id": tenant}
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        for expected in ("call_2_0", "call_3_0"):
            assert await wait_for_pending(client, session_id) == [expected]
            await verbs.approve(client, session_id, expected, "alice", **ours)
        result = await asyncio.wait_for(handle.result(), 60)

    assert result.status == "completed"
    root = session_root(workspace, tenant, sid)
    assert (root / "out/one.md").read_text() == "out/one.md"
    assert (root / "out/two.md").read_text() == "out/two.md"
    # Each step's read ran with its own arguments: the model read A, then B.
    results = {
        i.tool_call_id: i.text
        for i in await items_of(resources, tenant, session_id)
        if i.kind == "tool_result"
    }
    assert "contents of A" in results["call_0_0"] and "contents of B" in results["call_1_0"]
    last = provider.requests[-1]
    _assert_consistent(last)
    told = [m.content for m in _tool_messages(last)]
    assert "contents of A" in told[0] and "contents of B" in told[1]
    # The provider's own id comes back to it where it is unambiguous (its first use).
    assert provider.requests[1].messages[-2].tool_calls[0].id == "call_0"
    assert _tool_messages(provider.requests[1])[0].tool_call_id == "call_0"


async def test_an_id_repeated_within_one_reply_runs_both_calls(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [_read("a.txt", "dup"), _read("b.txt", "dup")]}]
    )
    sid = await _seeded(workspace, tenant)
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        result = await asyncio.wait_for(handle.result(), 60)

    assert result.status == "completed"
    items = await items_of(resources, tenant, session_id)
    calls = [(i.tool_call_id, i.data["arguments"]["path"]) for i in items if i.kind == "tool_call"]
    assert calls == [("call_0_0", "a.txt"), ("call_0_1", "b.txt")]
    results = {i.tool_call_id: i.text for i in items if i.kind == "tool_result"}
    assert "contents of A" in results["call_0_0"] and "contents of B" in results["call_0_1"]
    second = provider.requests[1]
    _assert_consistent(second)
    assert [c.id for c in second.messages[-3].tool_calls] == ["dup", "call_0_1"]
    told = {m.tool_call_id: m.content for m in _tool_messages(second)}
    assert "contents of A" in told["dup"] and "contents of B" in told["call_0_1"]


async def test_calls_without_usable_ids_and_their_results_reach_the_next_prompt(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    # Empty ids, and one longer than any provider needs (it used to fail the model step).
    provider = ScriptedProvider.from_data(
        [
            {"tool_calls": [_read("a.txt", ""), _read("b.txt", "x" * 300)]},
            {"tool_calls": [_read("a.txt", "")]},
        ]
    )
    sid = await _seeded(workspace, tenant)
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        result = await asyncio.wait_for(handle.result(), 60)

    assert result.status == "completed"
    items = await items_of(resources, tenant, session_id)
    # Calls of one step run concurrently: their results commit in either order.
    assert sorted(i.tool_call_id or "" for i in items if i.kind == "tool_result") == [
        "call_0_0",
        "call_0_1",
        "call_1_0",
    ]
    last = provider.requests[-1]
    _assert_consistent(last)
    assert [c.id for m in last.messages for c in m.tool_calls] == [
        "call_0_0",
        "call_0_1",
        "call_1_0",
    ]
    told = [m.content for m in _tool_messages(last)]
    assert len(told) == 3
    assert "contents of A" in told[0] and "contents of B" in told[1] and "contents of A" in told[2]
