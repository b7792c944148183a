"""A decision that reaches a worker in the same activation as the model reply that asks for
it: the SDK applies the update before the activity's result, so the validator refuses the
call as unknown. workers/client/decisions.py asks again while AgentState shows the call still to be
decided (a call AgentState does not hold is refused at once: tests/test_approvals.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.worker import Replayer, Worker

from durable_agents.activities.providers.base import ModelReply, ModelRequest
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.storage.models import SessionRow
from durable_agents.workers.process.cloud import SHUTDOWN_GRACE_SECONDS, cloud_activities, running
from durable_agents.workers.process.plugin import AgentPlugin
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from durable_agents.workflows.agent import AgentWorkflow
from tests.support import verbs
from tests.support.helpers import start, wait_for_pending

SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "out/a.txt", "content": "A"}}]}
]


class GatedProvider(ScriptedProvider):
    """Answers only once the test opens the gate; says when a request came in."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked = asyncio.Event()
        self.gate = asyncio.Event()

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.asked.set()
        await self.gate.wait()
        return await super().complete(request)


async def _until_model_call_completed(handle: WorkflowHandle[Any, Any]) -> None:
    async with asyncio.timeout(30):
        while True:
            history = await handle.fetch_history()
            done = EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
            if any(e.event_type == done for e in history.events):
                return
            await asyncio.sleep(0.05)


@dataclass
class Race:
    """A session whose model reply (asking for an approval) waits in history for a worker."""

    session_id: str
    handle: WorkflowHandle[Any, Any]
    worker: Callable[[], Worker]
    ours: dict[str, Any]


async def _reply_waiting(
    client: Client, resources: Resources, migrated: StackEndpoints, workspace: Path, tenant: str
) -> Race:
    queue = f"race-{uuid.uuid4().hex[:10]}"
    provider = GatedProvider.from_data(SCRIPT)
    assert isinstance(provider, GatedProvider)
    settings = migrated.settings(workspace=workspace, task_queue=queue, provider="scripted")
    acts = cloud_activities(settings, resources, provider, default_registry())

    def worker() -> Worker:
        # A stopping worker finishes the activities it runs (the grace period) but takes
        # no new task, workflow tasks included.
        return Worker(
            client,
            task_queue=queue,
            plugins=[AgentPlugin(acts, sandbox="strict")],
            max_cached_workflows=0,  # every workflow task replays the history first
            graceful_shutdown_timeout=timedelta(seconds=30),
        )

    first = worker()
    first_run = asyncio.create_task(first.run())
    stopping: asyncio.Task[None] | None = None
    try:
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, approval_policies={"write_file": "always"}
        )
        await asyncio.wait_for(provider.asked.wait(), 30)
        stopping = asyncio.create_task(first.shutdown())
        await asyncio.sleep(0.5)  # its pollers have stopped
        # The model answers: the reply commits (the call is in AgentState) and its result
        # waits in history for a workflow task that no worker takes yet.
        provider.gate.set()
        await asyncio.wait_for(stopping, 30)
    finally:
        provider.gate.set()
        if stopping is None:  # the test failed before it stopped the worker
            await first.shutdown()
        await asyncio.gather(first_run, return_exceptions=True)
        await asyncio.sleep(SHUTDOWN_GRACE_SECONDS)
    await _until_model_call_completed(handle)
    ours: dict[str, Any] = {"sessions": resources.sessions, "tenant_id": tenant}
    return Race(session_id, handle, worker, ours)


async def test_a_decision_arriving_with_the_reply_that_asks_for_it_is_accepted(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    workspace: Path,
    tenant: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="durable_agents.workers.client.decisions")
    race = await _reply_waiting(client, resources, migrated, workspace, tenant)
    decide = asyncio.create_task(
        verbs.approve(client, race.session_id, "call_0_0", "alice", **race.ours)
    )
    await asyncio.sleep(1.0)  # the update waits on the server with the model's result
    assert not decide.done()
    async with running(race.worker()):
        decision = await asyncio.wait_for(decide, 30)
        result = await asyncio.wait_for(race.handle.result(), 30)

    assert decision.approved and result.status == "completed"
    asked_again = [r for r in caplog.records if "asking again" in r.getMessage()]
    assert asked_again, "the approval should have been refused once and asked again"
    assert (workspace / tenant / race.session_id / "out/a.txt").read_text() == "A"


async def test_a_decision_taken_before_the_waiting_status_is_written_survives_a_replay(
    client: Client, resources: Resources, migrated: StackEndpoints, workspace: Path, tenant: str
) -> None:
    """The status query shows a call waiting while the workflow task that asked for it
    still writes that status; a decision taken then can be recorded in the same workflow
    task as the model's reply, and a replay applies it before the reply: it must still
    reach its call."""
    race = await _reply_waiting(client, resources, migrated, workspace, tenant)
    async with running(race.worker()):
        async with resources.sessions() as db, db.begin():
            # Hold the session's row: the waiting status write cannot commit meanwhile.
            this = SessionRow.id == uuid.UUID(race.session_id)
            await db.execute(select(SessionRow.id).where(this).with_for_update())
            await wait_for_pending(client, race.session_id, 30)
            decide = asyncio.create_task(
                verbs.approve(client, race.session_id, "call_0_0", "alice", **race.ours)
            )
            await asyncio.wait({decide}, timeout=15)
        decision = await asyncio.wait_for(decide, 30)
        result = await asyncio.wait_for(race.handle.result(), 60)
    history = await race.handle.fetch_history()
    folded = _decided_with_the_reply(race.handle.id, history)
    replayed = await Replayer(workflows=[AgentWorkflow]).replay_workflow(
        folded, raise_on_replay_failure=False
    )
    assert replayed.replay_failure is None, replayed.replay_failure
    assert decision.approved and result.status == "completed"
    assert (workspace / tenant / race.session_id / "out/a.txt").read_text() == "A"


_TASK = (
    "EVENT_TYPE_WORKFLOW_TASK_SCHEDULED",
    "EVENT_TYPE_WORKFLOW_TASK_STARTED",
    "EVENT_TYPE_WORKFLOW_TASK_COMPLETED",
)


def _decided_with_the_reply(workflow_id: str, history: WorkflowHistory) -> WorkflowHistory:
    """`history` as if the decision had been accepted in the first workflow task after the
    model's reply: the tasks between them (heartbeats while the status write waited on the
    row) folded into it, and every event id renumbered."""
    events: list[dict[str, Any]] = json.loads(history.to_json())["events"]
    types = [e["eventType"] for e in events]
    reply = types.index("EVENT_TYPE_ACTIVITY_TASK_COMPLETED")
    first = reply + 1  # the reply's workflow task: scheduled, started, completed
    assert tuple(types[first : first + 3]) == _TASK, types[first : first + 3]
    accepted = types.index("EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED")
    dropped = range(first + 3, accepted)
    assert dropped, "the decision was accepted in the reply's own workflow task"
    assert all(types[n] == _TASK[(n - first) % 3] for n in dropped), types[first:accepted]
    ids: dict[str, str] = {}
    for n, event in enumerate(events):
        if n in dropped:  # a folded task's events stand for the reply task's own
            ids[event["eventId"]] = events[first + (n - first) % 3]["eventId"]
    kept = [e for n, e in enumerate(events) if n not in dropped]
    for new, event in enumerate(kept, start=1):
        ids[event["eventId"]] = str(new)

    def renumber(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: ids.get(v, v) if k.endswith("EventId") or k == "eventId" else renumber(v)
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [renumber(v) for v in node]
        return node

    text = json.dumps({"events": [renumber(e) for e in kept]})
    return WorkflowHistory.from_json(workflow_id, text)
