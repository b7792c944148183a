"""The loop's lifecycle: continue-as-new, follow-up messages, cancellation, failures."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from durable_agents.activities.providers.base import ModelReply, ModelRequest
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.helpers import items_of, start, wait_for_pending


def _reads(n: int) -> list[dict[str, object]]:
    return [{"tool_calls": [{"name": "list_dir", "arguments": {}}]} for _ in range(n)]


async def test_continue_as_new_keeps_cursors_and_never_duplicates_items(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data(_reads(5))
    async with agent_worker(provider, workspace, sandbox="strict") as queue:
        # Force a new run every 2 steps (the production trigger is the server's suggestion).
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, continue_as_new_every=2
        )
        result = await asyncio.wait_for(handle.result(), 60)

    assert result.status == "completed" and result.steps == 6
    runs = [r async for r in client.list_workflows(f"WorkflowId = '{handle.id}'")]
    assert len(runs) >= 3, "expected the loop to continue as new"
    items = await items_of(resources, tenant, session_id)
    assert [i.kind for i in items].count("assistant_message") == 6
    assert [i.kind for i in items].count("tool_result") == 5
    assert len({i.idempotency_key for i in items}) == len(items)


async def test_follow_up_message_during_a_step_is_answered_before_finishing(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "write_file", "arguments": {"path": "x.md", "content": "x"}}]}]
    )
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        (call_id,) = await wait_for_pending(client, session_id)
        await verbs.send_message(client, resources.sessions, tenant, session_id, "also add y.md")
        await verbs.approve(
            client, session_id, call_id, "test", sessions=resources.sessions, tenant_id=tenant
        )
        result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    last = provider.requests[-1]
    assert any(m.role == "user" and m.content == "also add y.md" for m in last.messages)
    # The follow-up does not split the tool call from its result in the model's input.
    roles = [m.role for m in provider.requests[1].messages]
    assert roles.index("tool") == roles.index("assistant") + 1
    with pytest.raises(tasks.TaskNotRunning):
        await verbs.send_message(client, resources.sessions, tenant, session_id, "too late")


async def test_cancel_while_waiting_for_approval_ends_cleanly(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "write_file", "arguments": {"path": "x.md", "content": "x"}}]}]
    )
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        await wait_for_pending(client, session_id)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), 30)

    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
    row, items = await tasks.read_session(resources.sessions, tenant, session_id)
    assert row.status == "cancelled"
    assert not (workspace / tenant / session_id / "x.md").exists()
    assert items[-1].kind == "error" and "cancelled" in items[-1].text


class _BrokenModel:
    name = "broken"

    async def complete(self, request: ModelRequest) -> ModelReply:
        raise ApplicationError("HTTP 401: bad key", type="ModelAuthError", non_retryable=True)

    async def aclose(self) -> None:
        return None


async def test_non_retryable_model_error_fails_the_task_once_with_a_clear_reason(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    async with agent_worker(_BrokenModel(), workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), 30)

    assert "model call failed" in str(info.value.cause)
    row, items = await tasks.read_session(resources.sessions, tenant, session_id)
    assert row.status == "failed"
    assert items[-1].kind == "error" and "bad key" in items[-1].text
    history = await handle.fetch_history()
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert max(attempts) == 1, "a non-retryable error must not be retried"


async def test_step_limit_stops_a_model_that_never_finishes(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    async with agent_worker(ScriptedProvider.from_data(_reads(10)), workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, max_steps=3)
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), 30)
    assert "step limit of 3" in str(info.value.cause)
    row, _ = await tasks.read_session(resources.sessions, tenant, session_id)
    assert row.status == "failed"
