"""AgentInput is copied whole, never field by field: every setting of a task survives
continue-as-new, reaches a sub-agent, and comes from its TaskOptions at start. The settings
are one type (TaskSettings) that TaskOptions extends and AgentInput carries."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import fields
from pathlib import Path
from typing import Any

from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.client.http_bodies import StartTask
from durable_agents.workers.resources import Resources
from durable_agents.workers.task_options import TaskOptions
from durable_agents.workflows.contracts import AgentInput, CompactionRef, TaskSettings
from durable_agents.workflows.policies import workflow_id_for
from tests.conftest import AgentRunner
from tests.support.helpers import items_of, start

CURSORS = {"step", "seen_messages", "received_messages", "compaction"}
# Only a plain client's first run carries its task text: every derived input drops it.
FIRST_RUN_ONLY = {"task_text"}


def every_setting_changed() -> AgentInput:
    """An input whose every field, and every setting, differs from its default."""
    return AgentInput(
        session_id="s",
        tenant_id="t",
        settings=TaskSettings(
            max_steps=7,
            device_id="laptop",
            device_tools=["run_shell"],
            approval_policies={"fetch_url": "always"},
            approval_timeout_seconds=5,
            tool_timeout_seconds=6,
            device_schedule_to_start_seconds=8,
            max_pending_device_calls=2,
            model_outage_seconds=900,
            model_retry_max_interval_seconds=9,
            continue_as_new_every=4,
            stuck_after=3,
            budget_tokens=5_000,
            budget_cost_usd=1.5,
            budget_tool_calls=12,
            budget_seconds=600,
        ),
        step=3,
        seen_messages=2,
        received_messages=1,
        compaction=CompactionRef("c", 1, 9),
        depth=1,
        task_text="Survey the workspace.",
        agent="researcher",
        budget_root="root",
    )


def test_every_field_differs_from_its_default_in_the_fixture() -> None:
    # Keeps the tests below honest when AgentInput or TaskSettings grows a field.
    default = AgentInput(session_id="other")
    changed = every_setting_changed()
    assert [
        f.name for f in fields(AgentInput) if getattr(default, f.name) == getattr(changed, f.name)
    ] == []
    assert [
        f.name
        for f in fields(TaskSettings)
        if getattr(default.settings, f.name) == getattr(changed.settings, f.name)
    ] == []


def test_continue_as_new_keeps_every_setting_and_moves_the_cursors() -> None:
    inp = every_setting_changed()
    ref = CompactionRef("d", 2, 20)
    nxt = inp.continued(step=9, seen_messages=5, received_messages=4, compaction=ref)
    for f in fields(AgentInput):
        if f.name not in CURSORS | FIRST_RUN_ONLY:
            assert getattr(nxt, f.name) == getattr(inp, f.name), f.name
    assert nxt.task_text is None
    assert (nxt.step, nxt.seen_messages, nxt.received_messages, nxt.compaction) == (9, 5, 4, ref)
    nxt.settings.device_tools.append("x")
    assert inp.settings.device_tools == ["run_shell"]  # a copy, not shared


def test_a_child_gets_its_parents_settings_fresh_cursors_and_no_device() -> None:
    parent = every_setting_changed()
    child = parent.for_child("child")
    fresh = AgentInput(session_id="child")
    for f in fields(AgentInput):
        if f.name in CURSORS | FIRST_RUN_ONLY:
            assert getattr(child, f.name) == getattr(fresh, f.name), f.name
        elif f.name not in {"session_id", "depth", "settings"}:
            assert getattr(child, f.name) == getattr(parent, f.name), f.name
    for f in fields(TaskSettings):
        if f.name in {"device_id", "device_tools"}:
            assert getattr(child.settings, f.name) == getattr(fresh.settings, f.name), f.name
        else:
            assert getattr(child.settings, f.name) == getattr(parent.settings, f.name), f.name
    assert (child.session_id, child.depth) == ("child", 2)
    child.settings.approval_policies["x"] = "never"
    assert "x" not in parent.settings.approval_policies  # a copy, not shared
    # A root task's child spends the root's budget; so does that child's child.
    root = AgentInput(session_id="root")
    assert root.for_child("a").budget_root == "root"
    assert root.for_child("a").for_child("b").budget_root == "root"


def test_task_options_are_the_settings_and_carry_every_one_to_the_start_input() -> None:
    settings = every_setting_changed().settings
    values: dict[str, Any] = {f.name: getattr(settings, f.name) for f in fields(TaskSettings)}
    options = TaskOptions(tenant_id="t", project="p", model_config={"temperature": 0}, **values)
    assert isinstance(options, TaskSettings)
    started = options.agent_input("s")
    # The loop's input carries the settings alone: what only the start reads stays behind.
    assert type(started.settings) is TaskSettings and started.settings == settings
    assert (started.session_id, started.tenant_id) == ("s", "t")
    assert (started.step, started.depth, started.compaction, started.task_text) == (
        0,
        0,
        None,
        None,
    )
    options.device_tools.append("y")
    assert started.settings.device_tools == ["run_shell"]  # a copy, not shared


def test_a_start_option_of_its_own_is_not_a_setting_the_loop_carries() -> None:
    own = {f.name for f in fields(TaskOptions)} - {f.name for f in fields(TaskSettings)}
    assert own == {
        "tenant_id", "task_queue", "model_config", "project", "agent",
        "loosened_approvals", "loosened_by", "check",
    }  # fmt: skip


async def test_a_sub_agent_keeps_its_parents_continue_as_new_setting(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "delegate", "arguments": {"task": "SUB: look twice"}}]}],
        by_task={
            "SUB:": [
                {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
                {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
                {"text": "looked twice"},
            ]
        },
    )
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, continue_as_new_every=1
        )
        assert (await asyncio.wait_for(handle.result(), 60)).status == "completed"
    delegated = next(
        i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"
    )
    child_id = delegated.data["child_session_id"]
    uuid.UUID(child_id)
    desc = await client.get_workflow_handle(workflow_id_for(child_id)).describe()
    # The child ran three steps with continue_as_new_every=1: its latest run is not its first.
    assert desc.run_id != desc.raw_info.first_run_id


def test_the_gateways_start_body_is_a_view_of_the_task_options() -> None:
    # Its fields reach TaskOptions by name (workers/gateway/routes_tasks.py): one it had of its
    # own would be refused there as an unknown option, or silently mean something else.
    body = set(StartTask.model_fields) - {"text"}
    assert body <= {f.name for f in fields(TaskOptions)}, body - {
        f.name for f in fields(TaskOptions)
    }
