"""Text put into a session is bounded: a task, a follow-up or edited arguments over their
limit is refused naming the limit, before anything is committed; a model's tool call over
the argument cap becomes an error result the model sees, not a crash or a 300 KB write."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.helpers import committed_rows, items_of, session_root, start, wait_for_pending


def _write(path: str, content: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]}


async def test_a_task_over_the_limit_is_refused_naming_it_and_nothing_is_committed(
    client: Client, resources: Resources, tenant: str
) -> None:
    options = tasks.TaskOptions(tenant_id=tenant, task_queue=f"nobody-{uuid.uuid4().hex[:8]}")
    with pytest.raises(ValueError, match="AGENT_MAX_TASK_BYTES") as refused:
        await tasks.start_task(client, resources.sessions, "t" * 2_000_000, options)
    assert "the task text: 2000000 bytes is over the limit of 1048576" in str(refused.value)
    assert await committed_rows(resources, tenant) == {"sessions": 0, "items": 0, "artifacts": 0}


async def test_a_10_mb_message_is_refused_naming_the_limit_and_nothing_is_committed(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data([_write("out/a.md", "A")])
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        await wait_for_pending(client, session_id)
        before = await committed_rows(resources, tenant)
        with pytest.raises(ValueError, match="AGENT_MAX_MESSAGE_BYTES") as refused:
            await verbs.send_message(
                client, resources.sessions, tenant, session_id, "m" * 10_000_000
            )
        assert "the message: 10000000 bytes is over the limit" in str(refused.value)
        assert await committed_rows(resources, tenant) == before
        await verbs.approve(
            client, session_id, "call_0_0", "alice", sessions=resources.sessions, tenant_id=tenant
        )
        assert (await asyncio.wait_for(handle.result(), 30)).status == "completed"
    users = [m for r in provider.requests for m in r.messages if m.role == "user"]
    assert all(len(m.content) < 1_000 for m in users)


async def test_edited_arguments_over_the_limit_are_refused_before_anything_is_committed(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data([_write("out/a.md", "A")])
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        await wait_for_pending(client, session_id)
        before = await committed_rows(resources, tenant)
        with pytest.raises(ValueError, match="AGENT_MAX_EDIT_BYTES") as refused:
            await verbs.approve(
                client,
                session_id,
                "call_0_0",
                "alice",
                tenant_id=tenant,
                sessions=resources.sessions,
                edited_arguments={"path": "out/a.md", "content": "e" * 300_000},
            )
        assert "is over the limit of 262144 bytes" in str(refused.value)
        assert await committed_rows(resources, tenant) == before
        # Still waiting: the refused edit decided nothing, and a normal decision goes through.
        assert await wait_for_pending(client, session_id) == ["call_0_0"]
        await verbs.approve(
            client, session_id, "call_0_0", "alice", sessions=resources.sessions, tenant_id=tenant
        )
        assert (await asyncio.wait_for(handle.result(), 30)).status == "completed"
    assert (session_root(workspace, tenant, session_id) / "out/a.md").read_text() == "A"


async def test_a_model_tool_call_over_the_argument_cap_becomes_an_error_result(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data(
        [_write("out/big.md", "z" * 300_000), _write("out/small.md", "ok")]
    )
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            loosened_approvals={"write_file": "never"},
            loosened_by="test",
        )
        result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    assert not (session_root(workspace, tenant, session_id) / "out/big.md").exists()
    assert (session_root(workspace, tenant, session_id) / "out/small.md").read_text() == "ok"
    items = {(i.kind, i.tool_call_id): i for i in await items_of(resources, tenant, session_id)}
    error = items[("tool_result", "call_0_0")]
    assert error.data["error_type"] == "ArgumentsTooLarge"
    assert "AGENT_MAX_TOOL_ARGUMENT_BYTES" in error.text and error.artifact_id is None
    # The 300 KB is neither stored nor sent back to the model on every later step.
    stored = items[("tool_call", "call_0_0")].data["arguments"]
    assert stored["_oversized"]["bytes"] > 300_000
    told = {m.tool_call_id: m.content for m in provider.requests[1].messages if m.role == "tool"}
    assert "over the limit" in told["call_0_0"]
    assert all(len(str(c.arguments)) < 1_000 for c in provider.requests[1].messages[2].tool_calls)
