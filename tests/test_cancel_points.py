"""A cancel records `cancelled` wherever the loop is awaiting when it lands (issue 30): a model
call in flight, a tool run, a compaction the loop waits for. (Approval and device waits:
tests/test_loop_lifecycle.py, tests/test_device_wait.py.) Each case by Temporal's own
cancel and by the tenant-checked `cancel` update that `agentctl cancel` sends."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any, Literal

import pytest
from sqlalchemy import select
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.worker import Replayer

from durable_agents.activities.providers.base import ModelReply, ModelRequest, ToolSpec
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.base import Tool, ToolContext, ToolOutput, ToolRegistry
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.storage.models import SessionRow
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from durable_agents.workflows.agent import AgentWorkflow
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.gateway import poll
from tests.support.helpers import files_to_read, start

HISTORIES = Path(__file__).parent / "histories"

How = Literal["temporal", "update"]
# Small enough that a compaction is due after a few reads (tests/test_background_compaction.py).
BUDGET = {"context_tokens": 5_000, "reply_tokens": 500, "tool_result_tokens": 1_500}


class _Held(ScriptedProvider):
    """A scripted model whose chosen call (a chat step by number, or every summary) waits
    until released: the cancel lands while that call is in flight."""

    def __init__(self, script: list[dict[str, Any]], *, chat: int = -1, summary: bool = False):
        super().__init__(ScriptedProvider.from_data(script).turns)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.answered = 0
        # Set once every turn of the script and the final answer were replied.
        self.finished = asyncio.Event()
        self._last = len(script) + 1
        self._hold_chat, self._hold_summary, self._chats = chat, summary, 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        summary = request.purpose == "compaction"
        if not summary:
            self._chats += 1
        if (summary and self._hold_summary) or (not summary and self._chats == self._hold_chat):
            self.entered.set()
            await self.release.wait()
        reply = await super().complete(request)
        self.answered += not summary
        if self.answered == self._last:
            self.finished.set()
        return reply


def _held_tool(entered: asyncio.Event, release: asyncio.Event) -> Tool:
    async def wait(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        entered.set()
        await release.wait()
        return ToolOutput(b"released", "text/plain")

    spec = ToolSpec("wait", "Wait until released.", {"type": "object", "properties": {}})
    return Tool(spec, wait, effect="read_only")


async def _cancel(client: Client, res: Resources, tenant: str, session_id: str, how: How) -> None:
    if how == "update":
        result = await verbs.cancel(client, res.sessions, tenant, session_id)
        assert result.cancelled
    else:
        await tasks.task_handle(client, session_id).cancel()


async def _ends_cancelled(
    client: Client, res: Resources, tenant: str, session_id: str, how: How
) -> None:
    handle = tasks.task_handle(client, session_id)
    if how == "update":
        result = await asyncio.wait_for(handle.result(), 30)
        assert result.status == "cancelled"
    else:
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), 30)
        assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
    row, items = await tasks.read_session(res.sessions, tenant, session_id)
    assert row.status == "cancelled"
    # A cancelled tool run may also leave its error result, committed beside the cancel.
    assert any(i.kind == "error" and "cancelled" in i.text for i in items)
    assert not any("model call failed" in (i.text or "") for i in items)


@pytest.mark.parametrize("how", ["temporal", "update"])
async def test_a_cancel_while_the_model_call_is_in_flight_records_cancelled(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    how: How,
) -> None:
    provider = _Held([{"tool_calls": [{"name": "list_dir", "arguments": {}}]}], chat=2)
    try:
        async with agent_worker(provider, workspace) as queue:
            session_id, _ = await start(client, resources, queue, tenant=tenant)
            await asyncio.wait_for(provider.entered.wait(), 30)
            await _cancel(client, resources, tenant, session_id, how)
            await _ends_cancelled(client, resources, tenant, session_id, how)
    finally:
        provider.release.set()
    assert provider.answered == 1  # the held call never became a reply of the task
    history = await tasks.task_handle(client, session_id).fetch_history()
    replay = await Replayer(workflows=[AgentWorkflow]).replay_workflow(history)
    assert replay.replay_failure is None
    if os.environ.get("RECORD_HISTORIES") and how == "update":
        (HISTORIES / "cancel_during_model_call.json").write_text(history.to_json())


@pytest.mark.parametrize("how", ["temporal", "update"])
async def test_a_cancel_while_a_tool_runs_records_cancelled(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    how: How,
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    registry = ToolRegistry.of([*builtin_tools(), _held_tool(entered, release)])
    provider = ScriptedProvider.from_data([{"tool_calls": [{"name": "wait", "arguments": {}}]}])
    try:
        async with agent_worker(provider, workspace, registry=registry) as queue:
            session_id, _ = await start(client, resources, queue, tenant=tenant)
            await asyncio.wait_for(entered.wait(), 30)
            await _cancel(client, resources, tenant, session_id, how)
            await _ends_cancelled(client, resources, tenant, session_id, how)
    finally:
        release.set()
    # The loop did not go on to another step after the cancel.
    assert len(provider.requests) == 1


@pytest.mark.parametrize("how", ["temporal", "update"])
async def test_a_cancel_while_the_loop_waits_for_its_compaction_records_cancelled(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    how: How,
) -> None:
    sid, script = files_to_read(workspace, tenant, 8)
    provider = _Held(script, summary=True)
    try:
        async with agent_worker(provider, workspace, **BUDGET) as queue:
            session_id, _ = await start(client, resources, queue, tenant=tenant, session_id=sid)
            await asyncio.wait_for(provider.entered.wait(), 60)
            # Every step answered: the loop now waits for the held summary before it ends.
            await asyncio.wait_for(provider.finished.wait(), 60)
            await asyncio.sleep(1)
            await _cancel(client, resources, tenant, session_id, how)
            await _ends_cancelled(client, resources, tenant, session_id, how)
    finally:
        provider.release.set()


async def _status_is(res: Resources, tenant: str, session_id: str, status: str) -> None:
    async def current() -> str:
        row, _ = await tasks.read_session(res.sessions, tenant, session_id, limit=1)
        return row.status

    await poll(current, lambda s: s == status, within_seconds=60)


@pytest.mark.parametrize("how", ["temporal", "update"])
async def test_a_cancel_while_the_task_is_parked_at_its_budget_records_cancelled(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    how: How,
) -> None:
    script = [{"tool_calls": [{"name": "list_dir", "arguments": {}}]}] * 3
    provider = ScriptedProvider.from_data(script)
    async with agent_worker(provider, workspace) as queue:
        session_id, _ = await start(client, resources, queue, tenant=tenant, budget_tool_calls=1)
        await _status_is(resources, tenant, session_id, "budget_exhausted")
        await _cancel(client, resources, tenant, session_id, how)
        await _ends_cancelled(client, resources, tenant, session_id, how)
    # Parked before its second model call, and the cancel did not make one.
    assert len(provider.requests) == 1


@pytest.mark.parametrize("how", ["temporal", "update"])
async def test_a_cancel_while_a_sub_agent_runs_records_cancelled_for_both(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    how: How,
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    registry = ToolRegistry.of([*builtin_tools(), _held_tool(entered, release)])
    delegate = {"name": "delegate", "arguments": {"task": "SUB: wait", "agent": "default"}}
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [delegate]}],
        by_task={"SUB:": [{"tool_calls": [{"name": "wait", "arguments": {}}]}]},
    )
    try:
        async with agent_worker(provider, workspace, registry=registry) as queue:
            session_id, _ = await start(client, resources, queue, tenant=tenant)
            # The parent waits on its child, whose tool is running.
            await asyncio.wait_for(entered.wait(), 60)
            await _cancel(client, resources, tenant, session_id, how)
            await _ends_cancelled(client, resources, tenant, session_id, how)
            _, items = await tasks.read_session(resources.sessions, tenant, session_id)
            children = [i.data["child_session_id"] for i in items if "child_session_id" in i.data]
            child = children[0] if children else await _only_child(resources, tenant, session_id)
            await _status_is(resources, tenant, child, "cancelled")
    finally:
        release.set()


async def _only_child(res: Resources, tenant: str, parent: str) -> str:
    async with res.sessions() as db:
        ids = list(
            await db.scalars(
                select(SessionRow.id).where(
                    SessionRow.tenant_id == tenant, SessionRow.parent_id == uuid.UUID(parent)
                )
            )
        )
    assert len(ids) == 1, ids
    return str(ids[0])
