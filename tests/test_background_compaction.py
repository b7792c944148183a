"""A compaction runs beside the next model call, not before it (workflows/compactions.py),
and a loop waits for it before it ends or continues as new."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Replayer

from durable_agents.activities.providers.base import ModelReply, ModelRequest
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.compactions import CompactionRepository
from durable_agents.workers.resources import Resources
from durable_agents.workflows.agent import AgentWorkflow
from tests.conftest import AgentRunner
from tests.support.helpers import files_to_read, start

HISTORIES = Path(__file__).parent / "histories"
# Small enough that the previews alone pass the compaction threshold after a few steps,
# large enough that the step beside a compaction still fits whole.
BUDGET = {"context_tokens": 5_000, "reply_tokens": 500, "tool_result_tokens": 1_500}


class _SlowSummary(ScriptedProvider):
    """Model calls and summaries that each take a while: a summary notes whether a model
    call of the loop ran meanwhile. A loop that waits for its compaction keeps them apart."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        super().__init__(ScriptedProvider.from_data(script).turns)
        self.summaries = 0
        self.overlapped = 0
        self._chats = 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        if request.purpose != "compaction":
            self._chats += 1
            try:
                await asyncio.sleep(0.4)
                return await super().complete(request)
            finally:
                self._chats -= 1
        self.summaries += 1
        seen = False
        for _ in range(20):  # 1 s
            seen = seen or self._chats > 0
            await asyncio.sleep(0.05)
        self.overlapped += seen
        return await super().complete(request)


async def test_the_next_model_call_runs_while_the_summary_is_written(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    sid, script = files_to_read(workspace, tenant, 8)
    provider = _SlowSummary(script)
    async with agent_worker(provider, workspace, **BUDGET) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        result = await asyncio.wait_for(handle.result(), 90)

    assert result.status == "completed" and result.steps == 9
    assert provider.summaries >= 1
    assert provider.overlapped == provider.summaries, "a model call waited for a summary"
    async with resources.sessions() as db:
        versions = await CompactionRepository(db, tenant).for_session(uuid.UUID(session_id))
    # Every compaction started was committed before the loop ended.
    assert len(versions) == provider.summaries
    history = await handle.fetch_history()
    replay = await Replayer(workflows=[AgentWorkflow]).replay_workflow(history)
    assert replay.replay_failure is None
    if os.environ.get("RECORD_HISTORIES"):
        (HISTORIES / "background_compaction.json").write_text(history.to_json())


async def test_a_loop_continuing_as_new_leaves_no_compaction_behind(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    sid, script = files_to_read(workspace, tenant, 8)
    provider = _SlowSummary(script)
    async with agent_worker(provider, workspace, **BUDGET) as queue:
        _, handle = await start(
            client, resources, queue, tenant=tenant, session_id=sid, continue_as_new_every=2
        )
        result = await asyncio.wait_for(handle.result(), 120)

    assert result.status == "completed" and result.steps == 9
    # Every run waited for the compaction it started: none closed with one still running.
    runs, abandoned, run_id = 0, 0, handle.first_execution_run_id
    while run_id:
        history = await client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
        runs += 1
        scheduled = {
            e.event_id
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and e.activity_task_scheduled_event_attributes.activity_type.name == "compact_session"
        }
        completed = {
            e.activity_task_completed_event_attributes.scheduled_event_id
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        }
        abandoned += len(scheduled - completed)
        last = history.events[-1]
        run_id = (
            last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
            else None
        )
    assert runs >= 4
    assert provider.summaries >= 1
    assert abandoned == 0
