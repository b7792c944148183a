"""A decision that reaches a worker in the same activation as the model reply that asks for
it: the SDK applies the update before the activity's result, so the validator refuses the
call as unknown. workers/client/decisions.py asks again while AgentState shows the call still to be
decided (a call AgentState does not hold is refused at once: tests/test_approvals.py)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from durable_agents.activities.providers.base import ModelReply, ModelRequest
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.workers.process.cloud import SHUTDOWN_GRACE_SECONDS, cloud_activities, running
from durable_agents.workers.process.plugin import AgentPlugin
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support import verbs
from tests.support.helpers import start

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


async def test_a_decision_arriving_with_the_reply_that_asks_for_it_is_accepted(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    workspace: Path,
    tenant: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
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
            max_cached_workflows=0,
            graceful_shutdown_timeout=timedelta(seconds=30),
        )

    ours: dict[str, Any] = {"sessions": resources.sessions, "tenant_id": tenant}
    caplog.set_level(logging.INFO, logger="durable_agents.workers.client.decisions")
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
    decide = asyncio.create_task(verbs.approve(client, session_id, "call_0_0", "alice", **ours))
    await asyncio.sleep(1.0)  # the update waits on the server with the model's result
    assert not decide.done()
    async with running(worker()):
        decision = await asyncio.wait_for(decide, 30)
        result = await asyncio.wait_for(handle.result(), 30)

    assert decision.approved and result.status == "completed"
    asked_again = [r for r in caplog.records if "asking again" in r.getMessage()]
    assert asked_again, "the approval should have been refused once and asked again"
    assert (workspace / tenant / session_id / "out/a.txt").read_text() == "A"
