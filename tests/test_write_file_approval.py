"""write_file under `exists:path` (an agent's policy, or an operator's loosening of its
default `always`): it asks a person before it replaces a file that exists, and nobody
before it creates one. A call let through unasked because its file did not exist never
replaces one that appeared before it ran."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.agents import Agent
from durable_agents.activities.context.assembly import ContextBudget
from durable_agents.activities.model_call import ModelActivities
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tool_run import ToolActivities
from durable_agents.activities.tools.builtin import builtin_tools, default_registry
from durable_agents.storage.workspaces import WorkspaceLayout
from durable_agents.workers.resources import Resources
from durable_agents.workflows.contracts import ModelCallInput
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.helpers import items_of, session_root, start, wait_for_pending
from tests.support.tool_calls import ledger_state, new_call, result_of, run

# Its approvals hold for every turn it runs (the turn's recorded config), at decision and
# at run time alike.
WRITER = Agent(
    name="writer",
    instructions="Write what you are asked to.",
    tools=builtin_tools(),
    approvals={"write_file": "exists:path"},
)


def _writes(*calls: tuple[str, str]) -> ScriptedProvider:
    return ScriptedProvider.from_data(
        [
            {
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": path, "content": content}}
                    for path, content in calls
                ]
            }
        ]
    )


async def _kinds(res: Resources, tenant: str, session_id: str) -> dict[str, list[Any]]:
    items = await items_of(res, tenant, session_id)
    return {
        "approvals": [i for i in items if i.kind == "approval"],
        "results": [i for i in items if i.kind == "tool_result"],
    }


async def test_a_write_over_an_existing_file_waits_and_approved_it_is_written(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    sid = uuid.uuid4()
    notes = session_root(workspace, tenant, sid) / "notes.md"
    notes.write_text("a person's notes\n")
    provider = _writes(("notes.md", "one line"))
    async with agent_worker(provider, workspace, agents=(WRITER,)) as queue:
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, session_id=sid, agent="writer"
        )
        assert await wait_for_pending(client, session_id) == ["call_0_0"]
        assert notes.read_text() == "a person's notes\n"
        await verbs.approve(
            client, session_id, "call_0_0", "alice", sessions=resources.sessions, tenant_id=tenant
        )
        result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    assert notes.read_text() == "one line"


async def test_a_rejected_write_over_an_existing_file_leaves_it_as_it_was(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    sid = uuid.uuid4()
    notes = session_root(workspace, tenant, sid) / "notes.md"
    notes.write_text("a person's notes\n")
    first = os.stat(notes)
    provider = _writes(("notes.md", "one line"))
    async with agent_worker(provider, workspace, agents=(WRITER,)) as queue:
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, session_id=sid, agent="writer"
        )
        assert await wait_for_pending(client, session_id) == ["call_0_0"]
        await verbs.reject(
            client,
            session_id,
            "call_0_0",
            "keep my notes",
            "alice",
            sessions=resources.sessions,
            tenant_id=tenant,
        )
        result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    after = os.stat(notes)
    assert notes.read_text() == "a person's notes\n"
    assert (after.st_ino, after.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
    (rejected,) = (await _kinds(resources, tenant, session_id))["results"]
    assert rejected.data["error_type"] == "Rejected" and "keep my notes" in rejected.text


async def test_a_write_to_a_new_path_asks_nobody(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    sid = uuid.uuid4()
    root = session_root(workspace, tenant, sid)
    provider = _writes(("out/report.md", "# Report\n"))
    async with agent_worker(provider, workspace, agents=(WRITER,)) as queue:
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, session_id=sid, agent="writer"
        )
        # Nobody approves: a call that asked would park the task and time this out.
        result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    assert (root / "out/report.md").read_text() == "# Report\n"
    kinds = await _kinds(resources, tenant, session_id)
    assert kinds["approvals"] == []
    (written,) = kinds["results"]
    assert (
        written.data.get("error_type") is None
        and json.loads(written.text)["already_applied"] is False
    )


async def test_a_file_that_appears_after_the_decision_is_not_replaced_unasked(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    # One reply, two writes to one new path: both are decided before either runs, both
    # unasked (nothing there). The first creates it; the second finds it and is refused.
    sid = uuid.uuid4()
    root = session_root(workspace, tenant, sid)
    provider = _writes(("out/plan.md", "first"), ("out/plan.md", "second"))
    async with agent_worker(provider, workspace) as queue:
        # The default agent, its write_file loosened by an operator: the session's policy.
        session_id, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            session_id=sid,
            loosened_approvals={"write_file": "exists:path"},
            loosened_by="operator",
        )
        result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    kinds = await _kinds(resources, tenant, session_id)
    assert kinds["approvals"] == []
    errors = {r.tool_call_id: r.data.get("error_type") for r in kinds["results"]}
    assert sorted(errors.values(), key=str) == ["FileExists", None]
    (kept,) = [c for c, e in errors.items() if e is None]
    assert (root / "out/plan.md").read_text() == {"call_0_0": "first", "call_0_1": "second"}[kept]
    told = {m.tool_call_id: m.content for m in provider.requests[1].messages if m.role == "tool"}
    refused = next(c for c, e in errors.items() if e == "FileExists")
    assert "did not when this call was let through without approval" in told[refused]


async def test_a_write_whose_file_appeared_since_the_decision_writes_nothing(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    # Decided unasked (nothing there, no approval recorded); then a person creates the file.
    inp = await new_call(
        resources,
        tenant,
        "write_file",
        {"path": "out/plan.md", "content": "the model's"},
        approvals={"loosened": {"write_file": "exists:path"}},
    )
    (tmp_path / "out").mkdir()
    (tmp_path / "out/plan.md").write_text("a person's plan\n")
    registry = default_registry()
    acts = ToolActivities(resources.sessions, resources.store, registry, workspace=tmp_path)
    outcome = await run(acts, inp)
    assert outcome.error_type == "FileExists" and not outcome.in_doubt
    assert (tmp_path / "out/plan.md").read_text() == "a person's plan\n"
    assert "nothing was done" in (await result_of(resources, inp))["text"]
    assert await ledger_state(resources, inp) == ("failed", 1)


async def test_a_step_re_read_after_its_unasked_write_does_not_ask_about_that_file(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    # A resumed run re-reads each committed step (call_model under the step's key): the
    # file the call created since must not make it ask a person about a call that ran.
    sid = uuid.uuid4()
    provider = _writes(("out/report.md", "# Report\n"))
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            session_id=sid,
            loosened_approvals={"write_file": "exists:path"},
            loosened_by="operator",
        )
        assert (await asyncio.wait_for(handle.result(), 30)).status == "completed"
    assert (session_root(workspace, tenant, sid) / "out/report.md").exists()
    reply = next(
        i
        for i in await items_of(resources, tenant, session_id)
        if i.kind == "assistant_message" and i.data.get("step") == 0
    )
    acts = ModelActivities(
        resources.sessions,
        resources.store,
        ScriptedProvider.from_data([]),
        default_registry(),
        model="scripted",
        system_prompt="",
        budget=ContextBudget(),
        workspace=WorkspaceLayout(workspace),
    )
    step = ModelCallInput(session_id, tenant, 0, reply.idempotency_key)
    again = await ActivityEnvironment().run(acts.call_model, step)
    assert [(c.name, c.needs_approval, c.decision) for c in again.tool_calls] == [
        ("write_file", False, None)
    ]
