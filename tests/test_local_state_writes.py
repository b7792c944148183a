"""Status writes and approval records run as local activities (workflows/state_writes.py):
a park costs one scheduled activity (the model call) and two workflow tasks, and a write a
killed worker left half done is run again by the retried workflow task, committing once."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import text
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.session_state import SessionStateActivities
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import ApprovalRecordInput, ApproveInput, SessionStatusInput
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.blocking import wait_until_lock_waited
from tests.support.helpers import items_of, session_root, start, status_of
from tests.support.processes import WorkerProcess
from tests.support.tool_calls import new_call

HISTORIES = Path(__file__).parent / "histories"
SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "out/a.txt", "content": "A"}}]}
]
WRITES = ("set_session_status", "record_approval")


async def _wait_status(
    res: Resources, tenant: str, session_id: str, status: str, within: float = 30
) -> None:
    async with asyncio.timeout(within):
        while True:
            if await status_of(res, tenant, session_id) == status:
                return
            await asyncio.sleep(0.05)


def _count(history: WorkflowHistory) -> tuple[list[str], int, Counter[str]]:
    """(scheduled activity types, completed workflow tasks, markers by name) so far."""
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    tasks_done = sum(
        e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in history.events
    )
    markers = Counter(
        e.marker_recorded_event_attributes.marker_name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
    )
    return scheduled, tasks_done, markers


async def test_a_park_is_one_scheduled_activity_and_two_workflow_tasks(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    async with agent_worker(ScriptedProvider.from_data(SCRIPT), workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        await _wait_status(resources, tenant, session_id, "waiting_approval")
        # The status commits inside the second workflow task, before that task completes.
        async with asyncio.timeout(10):
            while True:
                scheduled, tasks_done, markers = _count(await handle.fetch_history())
                if tasks_done >= 2:
                    break
                await asyncio.sleep(0.05)
        # running and waiting_approval were written inside the two workflow tasks that
        # start the model call and take its result: markers, not scheduled activities.
        assert scheduled == ["call_model"]
        assert tasks_done == 2
        assert markers["core_local_activity"] == 2

        await verbs.approve(
            client, session_id, "call_0_0", "alice", sessions=resources.sessions, tenant_id=tenant
        )
        result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    history = await handle.fetch_history()
    scheduled, _, markers = _count(history)
    assert not set(WRITES) & set(scheduled), scheduled
    # running, waiting_approval, the decision with running again, completed.
    assert markers["core_local_activity"] == 4
    assert markers["core_patch"] == 1
    assert await status_of(resources, tenant, session_id) == "completed"
    kinds = Counter(i.kind for i in await items_of(resources, tenant, session_id))
    # The loop's record of the decision, written once it accepted it.
    assert kinds["approval"] == 1 and kinds["tool_result"] == 1
    assert (session_root(workspace, tenant, session_id) / "out/a.txt").read_text() == "A"
    if os.environ.get("RECORD_HISTORIES"):  # local_state_writes.json: before the patch
        (HISTORIES / "approval_record_writes_status.json").write_text(history.to_json())


@asynccontextmanager
async def _session_row_held(res: Resources, session_id: str) -> AsyncIterator[None]:
    """Every append to the session waits for this open transaction's row lock."""
    conn = await res.engine.connect()
    trans = await conn.begin()
    try:
        await conn.execute(
            text("SELECT id FROM sessions WHERE id = :id FOR UPDATE"), {"id": uuid.UUID(session_id)}
        )
        yield
    finally:
        await trans.rollback()
        await conn.close()


async def test_worker_killed_mid_approval_record_retries_the_task_and_records_once(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    queue = f"local-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(
        migrated, queue=queue, workspace=workspace, log=tmp_path / "worker.log", script=SCRIPT
    )
    worker.start()
    try:
        await asyncio.to_thread(worker.wait_started, 90)
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        await _wait_status(resources, tenant, session_id, "waiting_approval")
        async with _session_row_held(resources, session_id):
            # A plain client's approval: the update itself, so nothing of ours takes the lock.
            decide = asyncio.create_task(
                handle.execute_update(
                    AgentWorkflow.approve,
                    ApproveInput("call_0_0", decided_by="alice", tenant_id=tenant),
                )
            )
            await wait_until_lock_waited(resources, "%FROM sessions%FOR UPDATE%")
            worker.kill()  # mid record_approval: its workflow task never completes
        worker.start()
        decision = await asyncio.wait_for(decide, 60)
        result = await asyncio.wait_for(handle.result(), 60)
    finally:
        worker.stop()

    assert decision.approved and result.status == "completed"
    items = await items_of(resources, tenant, session_id)
    kinds = Counter(i.kind for i in items)
    assert kinds["approval"] == 1, "the retried workflow task must not record the decision twice"
    assert kinds["tool_result"] == 1
    assert len({i.idempotency_key for i in items}) == len(items)
    history = await handle.fetch_history()
    lost = {
        EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
        EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
    }
    assert any(e.event_type in lost for e in history.events), "the kill should cost a task"
    assert not set(WRITES) & set(_count(history)[0])


async def _a_call(
    resources: Resources, tenant: str
) -> tuple[str, str, ActivityEnvironment, SessionStateActivities]:
    """A session with one write_file call: its id, the call's id, and what runs the writes."""
    call = await new_call(resources, tenant, "write_file", {"path": "a", "content": "x"})
    state = SessionStateActivities(resources.sessions)
    return call.session_id, call.tool_call_id, ActivityEnvironment(), state


async def test_a_write_run_again_after_it_committed_commits_nothing_new(
    resources: Resources, tenant: str
) -> None:
    # The case a kill cannot be timed into: the local activity committed, the worker died
    # before its workflow task completed, and the retried task runs the same write again.
    s, c, env, state = await _a_call(resources, tenant)
    reject = ApprovalRecordInput(s, tenant, 0, c, False, "timeout", "late", f"agent-{s}:0:{c}")
    fail = SessionStatusInput(s, tenant, "failed", "step limit", f"agent-{s}:1:status:x")
    for _ in range(2):
        await env.run(state.record_approval, reject)
        await env.run(state.set_session_status, fail)

    kinds = Counter(i.kind for i in await items_of(resources, tenant, s))
    assert kinds == {"tool_call": 1, "approval": 1, "tool_result": 1, "error": 1}
    assert await status_of(resources, tenant, s) == "failed"


async def test_a_decision_that_resumes_the_loop_writes_the_status_in_its_own_transaction(
    resources: Resources, tenant: str
) -> None:
    s, c, env, state = await _a_call(resources, tenant)
    await env.run(state.set_session_status, SessionStatusInput(s, tenant, "waiting_approval"))
    approve = ApprovalRecordInput(
        s, tenant, 0, c, True, "alice", "", f"agent-{s}:0:{c}", status="running"
    )
    await env.run(state.record_approval, approve)
    assert await status_of(resources, tenant, s) == "running"
    # Without a status the record leaves it as it was (the loop writes its own).
    await env.run(state.set_session_status, SessionStatusInput(s, tenant, "waiting_approval"))
    quiet = ApprovalRecordInput(s, tenant, 1, c, True, "alice", "", f"agent-{s}:1:{c}")
    await env.run(state.record_approval, quiet)
    assert await status_of(resources, tenant, s) == "waiting_approval"
