"""A plain Temporal start meets the command layer's rules in the workflow itself: its id
must be the one derived from its session id, its options pass the same checks as at every
other door before anything runs, and a refused start is a failed workflow, never a stuck
one, with nothing written into any session."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError

from durable_agents.activities.providers.offline import OfflineProvider
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.sessions import SessionRepository
from durable_agents.workers.resources import Resources
from durable_agents.workflows.contracts import AgentInput, AgentResult
from tests.conftest import AgentRunner
from tests.support.helpers import (
    committed_rows,
    copy_demo_workspace,
    items_of,
    session_root,
    start,
    wait_for_pending,
)
from tests.support.plain_inputs import plain_input

DONE = [{"text": "done"}]


async def _refusal(handle: WorkflowHandle[Any, Any]) -> ApplicationError:
    with pytest.raises(WorkflowFailureError) as info:
        await asyncio.wait_for(handle.result(), 30)
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.non_retryable
    return cause


async def test_a_start_under_another_id_cannot_write_into_a_running_session(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    sid = uuid.uuid4()
    copy_demo_workspace(session_root(workspace, tenant, sid))
    async with agent_worker(OfflineProvider(), workspace) as queue:
        _, owner = await start(client, resources, queue, tenant=tenant, session_id=sid)
        await wait_for_pending(client, str(sid))
        before = [(i.id, i.text) for i in await items_of(resources, tenant, str(sid))]
        forged = await client.start_workflow(
            "AgentWorkflow",
            AgentInput(session_id=str(sid), tenant_id=tenant, task_text="Say it is done."),
            id=f"other-{uuid.uuid4()}",
            task_queue=queue,
        )
        cause = await _refusal(forged)
        # The real task is still the one waiting, and its session is as it was.
        assert await wait_for_pending(client, str(sid)) != []
        after = [(i.id, i.text) for i in await items_of(resources, tenant, str(sid))]
        async with resources.sessions() as db:
            row = await SessionRepository(db, tenant).get(sid)
        await owner.terminate()
    assert cause.type == "SessionIdTaken"
    assert after == before
    assert row.status == "waiting_approval"


async def test_a_start_under_another_id_of_a_new_session_is_refused(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    sid = str(uuid.uuid4())
    async with agent_worker(ScriptedProvider.from_data(DONE), workspace) as queue:
        handle = await client.start_workflow(
            "AgentWorkflow",
            AgentInput(session_id=sid, tenant_id=tenant, task_text="hello"),
            id=f"mine-{sid}",
            task_queue=queue,
        )
        cause = await _refusal(handle)
    assert cause.type == "InvalidTaskInput" and "runs as its own workflow" in cause.message
    assert await committed_rows(resources, tenant) == {"sessions": 0, "items": 0, "artifacts": 0}


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"tool_timeout_seconds": -1}, "tool_timeout_seconds must be > 0"),
        ({"max_steps": 10**9}, "max_steps must be >= 1 and <= 10000"),
        ({"depth": 10**6}, "depth must be >= 0 and <= 2"),
        ({"max_pending_device_calls": -5}, "max_pending_device_calls must be >= 1"),
        ({"approval_policies": {"write_file": r"match:path:(a)\1"}}, "approval_policies"),
        ({"step": 7}, "a start with task_text begins a new task"),
        (
            {"approval_policies": {f"t{n}": "always" for n in range(50_000)}},
            "approval_policies has 50000 entries; at most 64 are allowed",
        ),
    ],
    ids=[
        "negative-timeout",
        "huge-steps",
        "deep",
        "negative-pending",
        "backreference",
        "cursor",
        "policy-bloat",
    ],
)
async def test_a_plain_start_with_bad_options_fails_at_once_and_commits_nothing(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    fields: dict[str, Any],
    words: str,
) -> None:
    sid = str(uuid.uuid4())
    async with agent_worker(ScriptedProvider.from_data(DONE), workspace) as queue:
        handle = await client.start_workflow(
            "AgentWorkflow",
            plain_input(sid, tenant, task_text="hello", **fields),
            id=f"agent-{sid}",
            task_queue=queue,
            result_type=AgentResult,
        )
        cause = await _refusal(handle)
    assert cause.type == "InvalidTaskInput" and words in cause.message
    assert await committed_rows(resources, tenant) == {"sessions": 0, "items": 0, "artifacts": 0}
    history = await handle.fetch_history()
    kinds = [e.event_type for e in history.events]
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in kinds
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in kinds  # refused, never stuck


async def test_bad_options_of_a_committed_session_mark_it_failed_not_stuck(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    """A session committed by a door, then started again by hand with a bad option: the run
    records the refusal on its own session (its id matches) and ends."""
    async with agent_worker(ScriptedProvider.from_data(DONE), workspace) as queue:
        sid, first = await start(client, resources, queue, tenant=tenant)
        await first.result()
        again = await client.start_workflow(
            "AgentWorkflow",
            plain_input(sid, tenant, tool_timeout_seconds=-1),
            id=f"agent-{sid}",
            task_queue=queue,
        )
        cause = await _refusal(again)
        async with resources.sessions() as db:
            row = await SessionRepository(db, tenant).get(uuid.UUID(sid))
    assert cause.type == "InvalidTaskInput"
    assert row.status == "failed"


async def test_model_steps_do_not_carry_the_tasks_approval_policies(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    """The session holds them; every step's activity input would repeat them otherwise."""
    policies = {f"tool_{n}": "always" for n in range(64)}
    script = [{"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}] * 3 + DONE
    async with agent_worker(ScriptedProvider.from_data(script), workspace) as queue:
        sid, handle = await start(
            client, resources, queue, tenant=tenant, approval_policies=policies
        )
        await handle.result()
    history = await handle.fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "call_model"
    ]
    assert len(scheduled) == 4
    for attrs in scheduled:
        assert b"tool_63" not in attrs.input.SerializeToString()
    async with resources.sessions() as db:
        row = await SessionRepository(db, tenant).get(uuid.UUID(sid))
    assert row.approvals is not None and row.approvals["policies"] == policies
