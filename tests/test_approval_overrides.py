"""Per-task approval overrides (tool -> needs approval) are approval policies ("always",
"never"). TaskOptions still takes them and hands the workflow policies; an input that still
carries overrides (a task started before, a history recorded then: see
tests/histories/approval_overrides.json, replayed by test_replay.py) behaves as it did."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.items import ItemRepository, NewItem
from durable_agents.storage.sessions import SessionRepository
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.resources import Resources
from durable_agents.workers.task_options import TaskOptions
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import AgentInput
from durable_agents.workflows.policies import workflow_id_for
from tests.conftest import AgentRunner
from tests.support.helpers import items_of, run_approving, session_root

HISTORIES = Path(__file__).parent / "histories"
# write_file asks for approval by default, list_dir does not: each override flips one.
OVERRIDES = {"write_file": False, "list_dir": True}
FOLDED = {"write_file": "never", "list_dir": "always"}
SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]},
    {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
    {"text": "done"},
]


def test_task_options_turn_overrides_into_policies_that_beat_a_policy_for_the_same_tool() -> None:
    """An override that asks adds a policy; one that stops asking is a loosening by the
    code holding TaskOptions (an operator), recorded as such with the session."""
    opts = TaskOptions(
        approval_overrides=OVERRIDES,
        approval_policies={"write_file": "always", "fetch_url": "outside:out"},
    )
    inp = opts.agent_input("s")
    assert inp.approval_overrides == {}
    assert inp.approval_policies == {"list_dir": "always", "fetch_url": "outside:out"}
    assert opts.approvals_record() == {
        "policies": {"list_dir": "always", "fetch_url": "outside:out"},
        "loosened": {"write_file": "never"},
        "loosened_by": "operator",
    }


async def test_an_input_that_still_carries_overrides_asks_for_approval_as_before(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path
) -> None:
    sid = uuid.uuid4()
    session_root(workspace, "default", sid)
    async with agent_worker(ScriptedProvider.from_data(SCRIPT), workspace) as queue:
        async with resources.sessions() as db, db.begin():
            await SessionRepository(db, "default").create(sid, title="t", model_config={})
            await ItemRepository(db, "default").append(
                NewItem(sid, ItemKind.USER_MESSAGE, "user", f"{sid}:task", text="Write a.")
            )
        # As a client started tasks before overrides were folded into policies.
        handle = await client.start_workflow(
            AgentWorkflow.run,
            AgentInput(str(sid), approval_overrides=dict(OVERRIDES)),
            id=workflow_id_for(str(sid)),
            task_queue=queue,
        )
        result, approved = await run_approving(client, resources, str(sid), handle)
    history = await handle.fetch_history()
    if os.environ.get("RECORD_HISTORIES"):
        (HISTORIES / "approval_overrides.json").write_text(history.to_json())

    assert result.status == "completed"
    items = await items_of(resources, "default", str(sid))
    calls = {i.tool_name: i.tool_call_id for i in items if i.kind == ItemKind.TOOL_CALL}
    assert approved == [calls["list_dir"]]  # write_file ran unasked
    assert (session_root(workspace, "default", sid) / "a.txt").read_text() == "x"
    # The model calls decided with the overrides as policies.
    asked = [
        json.loads(e.activity_task_scheduled_event_attributes.input.payloads[0].data)
        for e in history.events
        if e.activity_task_scheduled_event_attributes.activity_type.name == "call_model"
    ]
    assert [a["approval_policies"] for a in asked] == [FOLDED] * len(SCRIPT)
