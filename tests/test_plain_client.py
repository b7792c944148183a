"""A trusted backend starts and approves a task with a plain Temporal client: any SDK's
`start_workflow("AgentWorkflow", ...)` with the task text inline, or the `temporal` CLI.

The workflow's first activity commits the text to AgentState once; afterwards history
carries only the item's id.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError

from durable_agents.activities.providers.offline import OfflineProvider
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.client.resume_point import resumed_input
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from durable_agents.workers.stack._process import find_executable
from durable_agents.workflows.contracts import AgentInput, AgentResult, ApproveInput, DecisionResult
from durable_agents.workflows.policies import MAX_INLINE_TASK_BYTES
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


def task_text() -> str:
    # A marker no other text holds: found in an event, it came from this task.
    return f"Survey the workspace and write the report. marker-{uuid.uuid4().hex}"


async def plain_start(
    client: Client, queue: str, session_id: str, tenant: str, text: str, **fields: Any
) -> WorkflowHandle[Any, AgentResult]:
    """What a backend with only the Temporal SDK does: no workers.client.tasks, no database."""
    return await client.start_workflow(
        "AgentWorkflow",
        plain_input(session_id, tenant, task_text=text, **fields),
        id=f"agent-{session_id}",
        task_queue=queue,
        result_type=AgentResult,
    )


async def approve_plainly(handle: WorkflowHandle[Any, Any], call_id: str, tenant: str) -> None:
    result = await handle.execute_update(
        "approve",
        ApproveInput(call_id, decided_by="backend", tenant_id=tenant),
        result_type=DecisionResult,
    )
    assert result == DecisionResult(call_id, True)


async def approve_until_done(
    client: Client, handle: WorkflowHandle[Any, Any], sid: str, tenant: str
) -> AgentResult:
    result_task = asyncio.create_task(handle.result())
    while not result_task.done():
        try:
            pending = await wait_for_pending(client, sid, within_seconds=1)
        except TimeoutError:
            continue
        for call_id in pending:
            await approve_plainly(handle, call_id, tenant)
    return await result_task


def events_holding(events: list[Any], marker: str) -> list[str]:
    return [
        EventType.Name(e.event_type) for e in events if marker.encode() in e.SerializeToString()
    ]


async def test_plain_python_client_start_commits_the_text_once_and_runs_to_completion(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    sid = str(uuid.uuid4())
    copy_demo_workspace(session_root(workspace, tenant, sid))
    text = task_text()
    async with agent_worker(OfflineProvider(), workspace) as queue:
        handle = await plain_start(client, queue, sid, tenant, text, agent="default")
        result = await approve_until_done(client, handle, sid, tenant)
    assert result.status == "completed"
    items = await items_of(resources, tenant, sid)
    tasks_ = [i for i in items if i.kind == ItemKind.USER_MESSAGE]
    assert [(i.ordinal, i.text, i.idempotency_key) for i in tasks_] == [
        (1, text, f"agent-{sid}:task")
    ]
    history = await handle.fetch_history()
    if os.environ.get("RECORD_HISTORIES"):  # replayed by tests/test_replay.py
        (Path(__file__).parent / "histories" / "plain_client_start.json").write_text(
            history.to_json()
        )
    # The start event holds the text; no other event (activity inputs and results, the
    # update, the completion) repeats it.
    assert events_holding(list(history.events), text.rsplit(" ", 1)[1]) == [
        "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"
    ]
    opened = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "open_session"
    ]
    assert len(opened) == 1


async def test_continue_as_new_drops_the_task_text(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    sid = str(uuid.uuid4())
    copy_demo_workspace(session_root(workspace, tenant, sid))
    text = task_text()
    async with agent_worker(OfflineProvider(), workspace) as queue:
        handle = await plain_start(client, queue, sid, tenant, text, continue_as_new_every=1)
        result = await approve_until_done(client, handle, sid, tenant)
    assert result.status == "completed"
    first_run = await client.get_workflow_handle(
        handle.id, run_id=handle.first_execution_run_id
    ).fetch_history()
    last = first_run.events[-1]
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    # The continued run's input is in that event: it must not carry the text again.
    assert events_holding(list(first_run.events), text.rsplit(" ", 1)[1]) == [
        "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"
    ]
    items = await items_of(resources, tenant, sid)
    assert [i.text for i in items if i.kind == ItemKind.USER_MESSAGE] == [text]


async def test_a_repeated_start_of_the_same_task_is_refused_and_commits_nothing_more(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    """A session id that exists is taken, whichever run made it: a second start under the
    same id (Temporal lets a closed workflow's id be reused) writes nothing into it. A
    retried open_session of the same run finds its own session and item instead."""
    sid = str(uuid.uuid4())
    copy_demo_workspace(session_root(workspace, tenant, sid))
    text = task_text()
    async with agent_worker(OfflineProvider(), workspace) as queue:
        handle = await plain_start(client, queue, sid, tenant, text)
        await approve_until_done(client, handle, sid, tenant)
        before = await items_of(resources, tenant, sid)
        again = await plain_start(client, queue, sid, tenant, text)
        cause = await failure_of(again)
    assert cause.type == "SessionIdTaken"
    items = await items_of(resources, tenant, sid)
    assert [i.id for i in items] == [i.id for i in before]
    assert [i.text for i in items if i.kind == ItemKind.USER_MESSAGE] == [text]


async def failure_of(handle: WorkflowHandle[Any, Any]) -> ApplicationError:
    with pytest.raises(WorkflowFailureError) as info:
        await asyncio.wait_for(handle.result(), 30)
    cause = info.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.non_retryable
    return cause


@pytest.mark.parametrize(
    ("session_id", "text", "message"),
    [
        (f"not-a-uuid-{uuid.uuid4().hex}", "Survey.", "session_id must be a UUID"),
        (None, "   \n", "the task text is empty"),
        (None, "x" * (MAX_INLINE_TASK_BYTES + 1), "over the inline limit of 32768 bytes"),
    ],
    ids=["session-id-not-a-uuid", "empty-text", "text-over-32KiB"],
)
async def test_bad_start_input_fails_at_once_and_commits_nothing(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    session_id: str | None,
    text: str,
    message: str,
) -> None:
    sid = session_id or str(uuid.uuid4())
    async with agent_worker(OfflineProvider(), workspace) as queue:
        handle = await plain_start(client, queue, sid, tenant, text)
        cause = await failure_of(handle)
    assert cause.type == "InvalidTaskInput"
    assert message in cause.message
    assert await committed_rows(resources, tenant) == {"sessions": 0, "items": 0, "artifacts": 0}
    history = await handle.fetch_history()
    # Refused by the workflow itself: no activity was even scheduled.
    assert not any(
        e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED for e in history.events
    )


async def test_a_reserved_tenant_is_refused_before_anything_is_committed(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path
) -> None:
    async with agent_worker(OfflineProvider(), workspace) as queue:
        handle = await plain_start(client, queue, str(uuid.uuid4()), "_system", "Survey.")
        cause = await failure_of(handle)
    assert cause.type == "InvalidTaskInput"
    assert "reserved" in cause.message
    assert await committed_rows(resources, "_system") == {
        "sessions": 0,
        "items": 0,
        "artifacts": 0,
    }


async def test_another_tenants_session_id_is_refused_and_left_untouched(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    sid = uuid.uuid4()
    copy_demo_workspace(session_root(workspace, tenant, sid))
    async with agent_worker(OfflineProvider(), workspace) as queue:
        # The owner's task parks on its first approval; the intruder reuses its session id
        # under another workflow id (the same id would be refused by Temporal itself).
        _, owner = await start(client, resources, queue, tenant=tenant, session_id=sid)
        await wait_for_pending(client, str(sid))
        before = await committed_rows(resources, tenant)
        intruder = await client.start_workflow(
            "AgentWorkflow",
            AgentInput(session_id=str(sid), tenant_id="intruder", task_text="Delete it all."),
            id=f"intruder-{sid}",
            task_queue=queue,
        )
        cause = await failure_of(intruder)
        await owner.terminate()
    assert cause.type == "SessionIdTaken"
    assert await committed_rows(resources, tenant) == before
    assert await committed_rows(resources, "intruder") == {
        "sessions": 0,
        "items": 0,
        "artifacts": 0,
    }


async def test_a_session_with_another_task_is_refused_and_left_untouched(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    sid = uuid.uuid4()
    copy_demo_workspace(session_root(workspace, tenant, sid))
    async with agent_worker(OfflineProvider(), workspace) as queue:
        _, first = await start(client, resources, queue, tenant=tenant, session_id=sid)
        await wait_for_pending(client, str(sid))
        await first.terminate()
        before = await committed_rows(resources, tenant)
        # Same tenant, same workflow id, another text: not a retry of the same start.
        again = await plain_start(client, queue, str(sid), tenant, "Delete the report.")
        cause = await failure_of(again)
    assert cause.type == "SessionIdTaken"
    assert "is taken" in cause.message
    assert await committed_rows(resources, tenant) == before


async def temporal_cli(stack: StackEndpoints, *args: str) -> tuple[int, str]:
    """Run the `temporal` CLI the dev stack uses against the test server (exit code, output)."""
    proc = await asyncio.create_subprocess_exec(
        str(find_executable("temporal")),
        *args,
        "--address",
        stack.temporal_address,
        "--namespace",
        "default",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode()


async def test_the_temporal_cli_starts_a_task_and_approves_its_calls(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    migrated: StackEndpoints,
    workspace: Path,
    tenant: str,
) -> None:
    sid = str(uuid.uuid4())
    copy_demo_workspace(session_root(workspace, tenant, sid))
    text = task_text()
    wid = f"agent-{sid}"
    async with agent_worker(OfflineProvider(), workspace) as queue:
        code, out = await temporal_cli(
            migrated,
            "workflow",
            "start",
            "--type",
            "AgentWorkflow",
            "--task-queue",
            queue,
            "--workflow-id",
            wid,
            "--input",
            json.dumps({"session_id": sid, "tenant_id": tenant, "task_text": text}),
        )
        assert code == 0, out
        handle = client.get_workflow_handle(wid, result_type=AgentResult)
        approved: list[str] = []
        while True:
            try:
                pending = await wait_for_pending(client, sid, within_seconds=5)
            except TimeoutError:
                # No call waits now: the task is finishing, or (a busy machine) its next
                # step has yet to ask.
                if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
                    break
                continue
            call_id = pending[0]
            code, out = await temporal_cli(
                migrated, "workflow", "query", "--workflow-id", wid, "--name", "status"
            )
            assert code == 0 and call_id in out, out
            # The tenant check holds for the CLI too: no tenant, or another one, is refused.
            for refused in ({"tool_call_id": call_id}, {"tool_call_id": call_id, "tenant_id": "x"}):
                code, out = await temporal_cli(
                    migrated,
                    "workflow",
                    "update",
                    "execute",
                    "--workflow-id",
                    wid,
                    "--name",
                    "approve",
                    "--input",
                    json.dumps(refused),
                )
                assert code != 0 and "TenantMismatch" in out, out
            code, out = await temporal_cli(
                migrated,
                "workflow",
                "update",
                "execute",
                "--workflow-id",
                wid,
                "--name",
                "approve",
                "--input",
                json.dumps({"tool_call_id": call_id, "tenant_id": tenant, "decided_by": "ops"}),
            )
            assert code == 0, out
            approved.append(call_id)
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "completed"
    assert approved
    items = await items_of(resources, tenant, sid)
    assert [i.text for i in items if i.kind == ItemKind.USER_MESSAGE] == [text]
    decisions = [i for i in items if i.kind == ItemKind.APPROVAL]
    assert [(d.tool_call_id, d.data["approved"], d.data["decided_by"]) for d in decisions] == [
        (c, True, "ops") for c in approved
    ]


def test_a_resumed_run_does_not_carry_the_task_text_again() -> None:
    first = AgentInput(session_id=str(uuid.uuid4()), tenant_id="t", task_text="Survey.")
    assert resumed_input(first, step=2, max_steps=None).task_text is None
