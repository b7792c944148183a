"""A tool result is one concept: every writer of a tool_result item (run_tool, a delegation's
report, a call that produced nothing, a rejected call) commits it the same way, with the
tool's name and a real token count; and "the tool_call item of this call" is one lookup."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.delegation import DelegationActivities
from durable_agents.activities.providers.base import ToolSpec
from durable_agents.activities.session_state import SessionStateActivities
from durable_agents.activities.tool_run import ToolActivities
from durable_agents.activities.tools.base import Tool, ToolContext, ToolOutput, ToolRegistry
from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.call_reads import effective_call
from durable_agents.storage.items import ItemRepository, NewItem
from durable_agents.storage.models import ItemRow
from durable_agents.storage.sessions import SessionRepository
from durable_agents.storage.tool_results import ToolResult
from durable_agents.vocabulary.item_marks import CHECK_FAILED, CHECK_KEY, NUDGE_KEY
from durable_agents.vocabulary.previews import PREVIEW_CHARS
from durable_agents.vocabulary.tokens import count_tokens
from durable_agents.workers.resources import Resources
from durable_agents.workflows.contracts import (
    ApprovalRecordInput,
    ChildSessionInput,
    DelegationResultInput,
    ToolErrorInput,
    ToolRunInput,
)


async def _echo(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    return ToolOutput(f"echo of {args.get('text', '')}".encode())


ECHO_ARGS = {"type": "object", "properties": {"text": {"type": "string"}}}
ECHO = Tool(ToolSpec("echo", "Echo the text.", ECHO_ARGS), _echo)


async def session_with_calls(res: Resources, tenant: str, calls: dict[str, Any]) -> uuid.UUID:
    """A session whose model asked for `calls` (call id -> (tool name, arguments))."""
    sid = uuid.uuid4()
    async with res.sessions() as db, db.begin():
        await SessionRepository(db, tenant).create(sid, title="t", model_config={})
        items = ItemRepository(db, tenant)
        for call_id, (name, arguments) in calls.items():
            await items.append(
                NewItem(
                    sid,
                    "tool_call",
                    "assistant",
                    f"{sid}:0:call:{call_id}",
                    text=name,
                    tool_call_id=call_id,
                    tool_name=name,
                    data={"arguments": arguments, "step": 0},
                )
            )
    return sid


async def result_of(res: Resources, tenant: str, key: str) -> ItemRow:
    async with res.sessions() as db:
        row = await ItemRepository(db, tenant).by_key(key)
    assert row is not None and row.kind == "tool_result"
    return row


# Each writer's call and the tool it asked for.
CALLS = {"ran": "echo", "lost": "echo", "rejected": "write_file", "delegated": "delegate"}


def shape_of(row: ItemRow) -> tuple[str | None, str | None, str, int, str]:
    tokens = "counted" if row.tokens == count_tokens(row.text) else f"estimated {row.tokens}"
    return row.tool_name, row.tool_call_id, row.role, row.data["step"], tokens


async def test_every_writer_commits_a_tool_result_with_its_tool_name_and_counted_tokens(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    # Words whose token count is far from the 4-characters-a-token estimate the repository
    # falls back to when a writer does not count.
    words = " ".join("abcdefghijklmnopqrstuvwxyz")
    sid = await session_with_calls(
        resources,
        tenant,
        {
            "ran": ("echo", {"text": words}),
            "lost": ("echo", {"text": words}),
            "rejected": ("write_file", {"path": "a", "content": words}),
            "delegated": ("delegate", {"task": words}),
        },
    )
    env, s = ActivityEnvironment(), str(sid)
    tools = ToolActivities(
        resources.sessions, resources.store, ToolRegistry.of([ECHO]), workspace=tmp_path
    )
    await env.run(tools.run_tool, ToolRunInput(s, tenant, 0, "ran", "echo", f"{s}:ran"))
    state = SessionStateActivities(resources.sessions)
    await env.run(
        state.record_tool_error,
        ToolErrorInput(s, tenant, 0, "lost", "echo", "DeviceOffline", words, f"{s}:lost"),
    )
    await env.run(
        state.record_approval,
        ApprovalRecordInput(s, tenant, 0, "rejected", False, "timeout", words, f"{s}:rejected"),
    )
    delegation = DelegationActivities(resources.sessions, resources.store)
    child = await env.run(
        delegation.open_child_session,
        ChildSessionInput(s, tenant, 0, "delegated", f"{s}:delegated"),
    )
    await env.run(
        delegation.record_delegation,
        DelegationResultInput(
            s, tenant, 0, "delegated", child.session_id, "completed", f"{s}:delegated"
        ),
    )

    rows = {call: await result_of(resources, tenant, f"{s}:{call}") for call in CALLS}
    # One comparison over all four writers: a failure shows every writer that disagrees.
    assert {call: shape_of(row) for call, row in rows.items()} == {
        call: (name, call, "tool", 0, "counted") for call, name in CALLS.items()
    }
    assert rows["ran"].text == f"echo of {words}" and rows["ran"].artifact_id is not None
    assert rows["lost"].data["error_type"] == "DeviceOffline"
    assert rows["lost"].artifact_id is None
    assert rows["rejected"].data["error_type"] == "Rejected"
    assert rows["rejected"].text.startswith("error (Rejected): the call was rejected by timeout")
    assert rows["delegated"].data["child_session_id"] == child.session_id
    assert rows["delegated"].data["artifact"]["content_type"] == "application/json"


async def test_the_tool_call_lookup_finds_the_calls_own_item_within_its_tenant(
    resources: Resources, tenant: str
) -> None:
    sid = await session_with_calls(resources, tenant, {"c1": ("echo", {"text": "x"})})
    async with resources.sessions() as db, db.begin():
        items = ItemRepository(db, tenant)
        # Items of the same call after it: a decision, then the result.
        for kind, role in (("approval", "user"), ("tool_result", "tool")):
            await items.append(NewItem(sid, kind, role, f"{sid}:{kind}", tool_call_id="c1"))
    async with resources.sessions() as db:
        items = ItemRepository(db, tenant)
        call = await items.tool_call(sid, "c1")
        thread = await items.call_thread(sid, "c1")
        assert call is not None and call.kind == "tool_call" and call.tool_name == "echo"
        assert thread is not None and thread.call.id == call.id
        assert [r.kind for r in thread.others] == ["approval", "tool_result"]
        assert await items.tool_call(sid, "c2") is None
        assert await items.call_thread(sid, "c2") is None
        other = ItemRepository(db, f"{tenant}-b")
        assert await other.tool_call(sid, "c1") is None
        assert await other.call_thread(sid, "c1") is None


async def test_the_calls_before_one_are_the_latest_of_its_turn_in_call_order_with_their_items(
    resources: Resources, tenant: str
) -> None:
    calls = {f"c{n}": ("echo", {"text": str(n)}) for n in range(6)}
    sid = await session_with_calls(resources, tenant, {"c0": calls.pop("c0")})
    async with resources.sessions() as db, db.begin():
        items = ItemRepository(db, tenant)
        # A person's message begins a turn: c0 is the turn before. A failed check's and a
        # nudge's (the loop's own words) do not.
        await items.append(NewItem(sid, "user_message", "user", f"{sid}:u", text="Go on."))
        for call_id, (name, arguments) in calls.items():
            if call_id == "c2":
                for mark in ({CHECK_KEY: CHECK_FAILED}, {NUDGE_KEY: "empty"}):
                    said = NewItem(sid, "user_message", "user", f"{sid}:{mark}", data=mark)
                    await items.append(said)
            call = NewItem(
                sid,
                "tool_call",
                "assistant",
                f"{sid}:{call_id}",
                tool_call_id=call_id,
                tool_name=name,
                data={"arguments": arguments},
            )
            await items.append(call)
        # Results commit in another order than the calls were made; c3's arguments edited.
        for call_id in ("c4", "c2", "c3"):
            await items.append(
                NewItem(sid, "tool_result", "tool", f"{sid}:r:{call_id}", tool_call_id=call_id)
            )
        edit = {"arguments": {"text": "edited"}}
        await items.append(
            NewItem(sid, "approval", "user", f"{sid}:a", tool_call_id="c3", data=edit)
        )
    async with resources.sessions() as db:
        st = AgentState(db, tenant)
        last = await st.items.tool_call(sid, "c5")
        assert last is not None
        threads = await st.calls.before(sid, last.ordinal, 3)
        assert [t.call.tool_call_id for t in threads] == ["c4", "c3", "c2"]
        assert [[r.kind for r in t.others] for t in threads] == [
            ["tool_result"],
            ["tool_result", "approval"],
            ["tool_result"],
        ]
        assert [effective_call(t).arguments for t in threads] == [
            {"text": "4"},
            {"text": "edited"},
            {"text": "2"},
        ]
        turn = await st.calls.before(sid, last.ordinal, 10)
        assert [t.call.tool_call_id for t in turn] == ["c4", "c3", "c2", "c1"]
        assert turn[-1].others == []  # no result yet
        assert await st.calls.before(sid, last.ordinal, 0) == []
        assert await AgentState(db, f"{tenant}-b").calls.before(sid, last.ordinal, 3) == []


def test_a_tool_result_is_an_artifact_or_an_error() -> None:
    with pytest.raises(ValueError, match="an artifact or an error type"):
        ToolResult(uuid.uuid4(), "c1", "echo", 0, "k")
    failed = ToolResult(uuid.uuid4(), "c1", "echo", 0, "k", error_type="Boom", error="x" * 900)
    assert failed.preview().startswith("error (Boom): xxx")
    assert len(failed.preview()) == PREVIEW_CHARS
