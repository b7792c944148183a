"""A decision recorded in a workflow task the server lost: the loop wrote the record (a local
activity, inside the task that took the update), then the server died before the task became
history, so the person who sent it was told it failed and the loop asks again. The decision
taken next is the one on record; the lost one is kept aside, seen by no reader, and a lost
rejection's result cannot stand in for the call's run. On the real database and S3."""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.testing import ActivityEnvironment

from durable_agents.activities.session_state import SessionStateActivities
from durable_agents.activities.tool_call_refs import decision_of
from durable_agents.activities.tool_run import ToolActivities
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.storage.agent_state import agent_state
from durable_agents.workers.resources import Resources
from durable_agents.workflows.contracts import ApprovalRecordInput, CommittedItem, ToolRunInput
from tests.support.helpers import status_of
from tests.support.tool_calls import (
    call_items,
    new_call,
    result_of,
    run,
    set_aside_rows,
)

ARGS = {"path": "out/decided.md", "content": "written after the decision\n"}


async def record(
    res: Resources, inp: ToolRunInput, approved: bool, by: str, request: bool = True
) -> tuple[ApprovalRecordInput, CommittedItem]:
    """One decision as the loop records it: `by`'s request staged first, as the command
    service stages it, unless `request` is False (the approval timeout's own decision)."""
    request_id = None
    if request:
        async with agent_state(res.sessions, inp.tenant_id, write=True) as st:
            staged = {"decided_by": by, "reason": f"{by}'s reason"}
            sid = uuid.UUID(inp.session_id)
            request_id = str(await st.requests.stage(sid, inp.tool_call_id, staged))
    decision = ApprovalRecordInput(
        inp.session_id,
        inp.tenant_id,
        inp.step,
        inp.tool_call_id,
        approved,
        by,
        "" if request else "no decision within 60s",
        inp.idempotency_key,
        request_id=request_id,
        status="running",
    )
    state = SessionStateActivities(res.sessions)
    committed: CommittedItem = await ActivityEnvironment().run(state.record_approval, decision)
    return decision, committed


async def park(res: Resources, inp: ToolRunInput) -> None:
    async with agent_state(res.sessions, inp.tenant_id, write=True) as st:
        await st.sessions.set_status(uuid.UUID(inp.session_id), "waiting_approval")


async def test_a_rejection_after_a_lost_approval_is_the_decision_and_the_call_gets_its_result(
    resources: Resources, tenant: str
) -> None:
    inp = await new_call(resources, tenant, "write_file", ARGS)
    await record(resources, inp, True, "alice")  # its workflow task lost with the server
    await park(resources, inp)  # what the loop, asking again, shows
    await record(resources, inp, False, "bob")

    items = await call_items(resources, tenant, inp.session_id, inp.tool_call_id)
    assert [(i.kind, i.data.get("decided_by")) for i in items] == [
        ("tool_call", None),
        ("approval", "bob"),
        ("tool_result", None),
    ]
    assert decision_of(items) is False
    assert items[2].data["error_type"] == "Rejected" and "rejected by bob" in items[2].text
    assert await status_of(resources, tenant, inp.session_id) == "running"
    (aside,) = await set_aside_rows(resources, tenant, inp.session_id)
    assert aside.data["decided_by"] == "alice" and aside.data["approved"] is True
    assert aside.data["key"] == f"{inp.idempotency_key}:decision"
    assert "lost" in aside.data["set_aside"]


async def test_an_approval_after_a_lost_rejection_runs_the_call(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    inp = await new_call(resources, tenant, "write_file", ARGS)
    await record(resources, inp, False, "bob")  # lost: its rejection's result with it
    await record(resources, inp, True, "alice")
    items = await call_items(resources, tenant, inp.session_id, inp.tool_call_id)
    assert [i.kind for i in items] == ["tool_call", "approval"]
    assert decision_of(items) is True

    outcome = await run(
        ToolActivities(resources.sessions, resources.store, default_registry(), workspace=tmp_path),
        inp,
    )
    assert outcome.error_type is None, "the lost rejection's result stood in for the run"
    assert (tmp_path / ARGS["path"]).read_text() == ARGS["content"]
    result = await result_of(resources, inp)
    assert "error_type" not in result
    # Every read of the session (its pages, the model's context window) goes through the
    # one filter: the lost rejection's result is not among them.
    async with agent_state(resources.sessions, tenant) as st:
        page = await st.items.page(uuid.UUID(inp.session_id))
    assert [i.text for i in page if i.kind == "tool_result"] == [result["text"]]
    aside = await set_aside_rows(resources, tenant, inp.session_id)
    assert [(r.kind, r.data.get("error_type")) for r in aside] == [
        ("approval", None),
        ("tool_result", "Rejected"),
    ]


async def test_a_retried_record_and_a_repeated_decision(resources: Resources, tenant: str) -> None:
    """The same decision's write retried is the one record; the same answer sent again by
    a new request (the first lost) is recorded as that request's, the first kept aside;
    and the timeout's decision after a lost one is recorded too."""
    inp = await new_call(resources, tenant, "write_file", ARGS)
    first, committed = await record(resources, inp, True, "alice")
    state = SessionStateActivities(resources.sessions)
    again = await ActivityEnvironment().run(state.record_approval, first)
    assert again == committed
    assert await set_aside_rows(resources, tenant, inp.session_id) == []

    _, second = await record(resources, inp, True, "alice")
    assert second.item_id != committed.item_id
    assert [r.id for r in await set_aside_rows(resources, tenant, inp.session_id)] == [
        uuid.UUID(committed.item_id)
    ]

    await record(resources, inp, False, "timeout", request=False)
    items = await call_items(resources, tenant, inp.session_id, inp.tool_call_id)
    assert decision_of(items) is False
    assert [(i.kind, i.data.get("decided_by")) for i in items][1:] == [
        ("approval", "timeout"),
        ("tool_result", None),
    ]
    assert len(await set_aside_rows(resources, tenant, inp.session_id)) == 2
