"""Agents as definitions: one worker serves several, each task sees and runs only its own
agent's tools under its own instructions, and a turn keeps the definition it began with."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from temporalio.client import Client, WorkflowFailureError

from durable_agents.activities.agents import Agent, AgentDefinitionError, Limits
from durable_agents.activities.providers.base import ToolSpec
from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.base import Tool, ToolContext, ToolOutput
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.storage.models import ContextConfigRow, TurnRow
from durable_agents.storage.sessions import SessionRepository
from durable_agents.workers.resources import Resources
from durable_agents.workers.task_options import TaskOptions
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.fake_openai import (
    FakeOpenAI,
    calls,
    fake_openai_provider,  # noqa: F401 (the `provider` fixture)
    fake_openai_server,  # noqa: F401 (the `server` fixture)
    says,
)
from tests.support.helpers import items_of, start, wait_for_pending, wait_until_recorded


def _tool(name: str, answer: str) -> Tool:
    async def run(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        return ToolOutput(f"{answer} for {args.get('place', '?')}".encode())

    spec = ToolSpec(
        name,
        f"{name} of a place",
        {"type": "object", "properties": {"place": {"type": "string"}}, "required": ["place"]},
    )
    return Tool(spec, run, effect="read_only")


WEATHER = Agent(
    name="weather",
    instructions="You forecast the weather.",
    tools=[_tool("forecast", "sunny")],
)
NOTES = Agent(
    name="notes",
    instructions="You keep notes.",
    tools=[_tool("lookup_note", "a note")],
    approvals={"lookup_note": "always"},
)


def _tools_of(body: dict[str, Any]) -> list[str]:
    return sorted(t["function"]["name"] for t in body.get("tools", []))


def _system_of(body: dict[str, Any]) -> str:
    return str(body["messages"][0]["content"])


async def test_two_agents_on_one_worker_each_see_only_their_own_tools_and_instructions(
    server: FakeOpenAI,
    provider: OpenAICompatibleProvider,
    agent_worker: AgentRunner,
    client: Client,
    resources: Resources,
    workspace: Path,
    tenant: str,
) -> None:
    server.reply = says("done")
    async with agent_worker(provider, workspace, agents=(WEATHER, NOTES)) as queue:
        results = []
        for agent in ("weather", "notes", "default"):
            _, handle = await start(client, resources, queue, "hi", tenant=tenant, agent=agent)
            results.append(await asyncio.wait_for(handle.result(), 60))
    assert [r.status for r in results] == ["completed"] * 3
    seen = {_system_of(r.body): _tools_of(r.body) for r in server.requests}
    assert seen["You forecast the weather."] == ["forecast"]
    assert seen["You keep notes."] == ["lookup_note"]
    default = next(tools for prompt, tools in seen.items() if "careful agent" in prompt)
    assert "read_file" in default and "forecast" not in default and "lookup_note" not in default


async def test_a_tool_of_another_agent_is_unknown_and_the_agent_s_own_runs(
    server: FakeOpenAI,
    provider: OpenAICompatibleProvider,
    agent_worker: AgentRunner,
    client: Client,
    resources: Resources,
    workspace: Path,
    tenant: str,
) -> None:
    # The weather agent's model asks for the notes agent's tool, then for its own.
    server.queued = [
        calls({"name": "lookup_note", "arguments": {"place": "x"}}),
        calls({"name": "forecast", "arguments": {"place": "Oslo"}}),
    ]
    server.reply = says("done")
    async with agent_worker(provider, workspace, agents=(WEATHER, NOTES)) as queue:
        sid, handle = await start(client, resources, queue, "hi", tenant=tenant, agent="weather")
        assert (await asyncio.wait_for(handle.result(), 60)).status == "completed"
    results = [i.text for i in await items_of(resources, tenant, sid) if i.kind == "tool_result"]
    assert results[0].startswith("error (UnknownTool)") and "forecast" in results[0]
    assert "lookup_note" not in results[0].split("the tools are:")[1]
    assert results[1] == "sunny for Oslo"


async def test_an_agent_s_approval_policy_makes_its_call_wait(
    server: FakeOpenAI,
    provider: OpenAICompatibleProvider,
    agent_worker: AgentRunner,
    client: Client,
    resources: Resources,
    workspace: Path,
    tenant: str,
) -> None:
    server.queued = [calls({"name": "lookup_note", "arguments": {"place": "home"}})]
    server.reply = says("done")
    async with agent_worker(provider, workspace, agents=(WEATHER, NOTES)) as queue:
        sid, handle = await start(client, resources, queue, "hi", tenant=tenant, agent="notes")
        (call,) = await wait_for_pending(client, sid)
        await verbs.approve(client, sid, call, "me", sessions=resources.sessions, tenant_id=tenant)
        assert (await asyncio.wait_for(handle.result(), 60)).status == "completed"


async def test_a_turn_keeps_the_definition_it_began_with_across_a_deploy(
    server: FakeOpenAI,
    provider: OpenAICompatibleProvider,
    agent_worker: AgentRunner,
    client: Client,
    resources: Resources,
    workspace: Path,
    tenant: str,
) -> None:
    server.queued = [calls({"name": "lookup_note", "arguments": {"place": "home"}})]
    server.reply = says("done")
    async with agent_worker(provider, workspace, agents=(NOTES,)) as queue:
        sid, handle = await start(client, resources, queue, "hi", tenant=tenant, agent="notes")
        (call,) = await wait_for_pending(client, sid)
        await wait_until_recorded(handle)
    # A deploy while the call waits: new instructions and one more tool.
    changed = Agent(
        name="notes",
        instructions="You keep notes, v2.",
        tools=[*NOTES.tools, _tool("forecast", "rain")],
        approvals=NOTES.approvals,
    )
    async with agent_worker(provider, workspace, queue=queue, agents=(changed,)):
        await verbs.approve(client, sid, call, "me", sessions=resources.sessions, tenant_id=tenant)
        assert (await asyncio.wait_for(handle.result(), 60)).status == "completed"
    first, second = server.requests[0].body, server.requests[1].body
    assert _system_of(second) == _system_of(first) == "You keep notes."
    assert _tools_of(second) == ["lookup_note"]
    async with resources.sessions() as db:
        config = await db.scalar(
            select(ContextConfigRow)
            .join(TurnRow, TurnRow.context_config_id == ContextConfigRow.id)
            .where(TurnRow.session_id == uuid.UUID(sid))
        )
    assert config is not None
    assert config.agent["name"] == "notes"
    assert config.agent["sha256"] != changed.fingerprint() and len(config.agent["sha256"]) == 64
    assert config.agent["approvals"] == {"lookup_note": "always"}
    # The next turn takes the new definition.
    server.requests.clear()
    async with agent_worker(provider, workspace, queue=queue, agents=(changed,)):
        _, handle = await start(client, resources, queue, "again", tenant=tenant, agent="notes")
        await asyncio.wait_for(handle.result(), 60)
    assert _system_of(server.requests[0].body) == "You keep notes, v2."


async def test_a_task_for_an_agent_the_worker_does_not_serve_fails_saying_which_it_serves(
    server: FakeOpenAI,
    provider: OpenAICompatibleProvider,
    agent_worker: AgentRunner,
    client: Client,
    resources: Resources,
    workspace: Path,
    tenant: str,
) -> None:
    async with agent_worker(provider, workspace, agents=(WEATHER,)) as queue:
        sid, handle = await start(client, resources, queue, "hi", tenant=tenant, agent="nope")
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), 60)
    (error,) = [i for i in await items_of(resources, tenant, sid) if i.kind == "error"]
    assert "no agent named 'nope'" in error.text and "default, weather" in error.text
    assert not server.requests  # nothing was sent to a model


def test_bad_definitions_are_refused_with_the_reason() -> None:
    tool = _tool("forecast", "x")
    with pytest.raises(AgentDefinitionError, match="letters, digits"):
        Agent(name="no spaces", instructions="x")
    with pytest.raises(AgentDefinitionError, match="no instructions"):
        Agent(name="a", instructions=" ")
    with pytest.raises(AgentDefinitionError, match="tools twice"):
        Agent(name="a", instructions="x", tools=[tool, tool])
    with pytest.raises(AgentDefinitionError, match="unknown approval policy"):
        Agent(name="a", instructions="x", approvals={"forecast": "sometimes"})
    with pytest.raises(AgentDefinitionError, match="max_steps"):
        Limits(max_steps=0)
    with pytest.raises(ValueError, match="letters, digits"):
        TaskOptions(agent="../x")


def test_the_fingerprint_changes_with_anything_the_agent_acts_on() -> None:
    base = Agent(name="a", instructions="x", tools=[_tool("forecast", "x")])
    assert (
        base.fingerprint()
        == Agent(name="a", instructions="x", tools=[_tool("forecast", "y")]).fingerprint()
    )
    for changed in (
        Agent(name="a", instructions="y", tools=base.tools),
        Agent(name="a", instructions="x"),
        Agent(name="a", instructions="x", tools=base.tools, approvals={"forecast": "always"}),
        Agent(name="a", instructions="x", tools=base.tools, limits=Limits(max_steps=3)),
        Agent(name="a", instructions="x", tools=[Tool(base.tools[0].spec, base.tools[0].fn)]),
    ):
        assert changed.fingerprint() != base.fingerprint()


def test_task_options_for_an_agent_take_its_limits_and_device_tools_unless_given() -> None:
    agent = Agent(
        name="a",
        instructions="x",
        tools=[_tool("forecast", "x")],
        device_tools=["forecast"],
        limits=Limits(max_steps=5, tool_timeout_seconds=9),
    )
    opts = TaskOptions.for_agent(agent, device_id="laptop")
    assert (opts.agent, opts.max_steps, opts.tool_timeout_seconds) == ("a", 5, 9)
    assert opts.device_tools == ["forecast"]
    assert TaskOptions.for_agent(agent, max_steps=7).max_steps == 7
    assert TaskOptions.for_agent(agent).device_tools == []  # no device, no device tools


async def test_a_sub_agent_runs_its_parent_s_agent_definition(
    agent_worker: AgentRunner, client: Client, resources: Resources, workspace: Path, tenant: str
) -> None:
    agent = Agent(
        name="planner",
        instructions="Plan.",
        tools=[*builtin_tools("delegate"), _tool("forecast", "hail")],
    )
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "delegate", "arguments": {"task": "SUB: forecast Oslo"}}]}],
        by_task={
            "SUB:": [
                {"tool_calls": [{"name": "forecast", "arguments": {"place": "Oslo"}}]},
                {"text": "hail"},
            ]
        },
    )
    async with agent_worker(provider, workspace, agents=(agent,)) as queue:
        sid, handle = await start(client, resources, queue, "plan", tenant=tenant, agent="planner")
        assert (await asyncio.wait_for(handle.result(), 60)).status == "completed"
    delegated = next(i for i in await items_of(resources, tenant, sid) if i.kind == "tool_result")
    child_id = uuid.UUID(delegated.data["child_session_id"])
    async with resources.sessions() as db:
        child = await SessionRepository(db, tenant).get(child_id)
    assert child.agent_definition == "planner"
    child_results = [i.text for i in await items_of(resources, tenant, str(child_id))]
    assert "hail for Oslo" in child_results
    child_request = next(r for r in provider.requests if "SUB:" in r.messages[1].content)
    assert child_request.messages[0].content == "Plan."
    assert sorted(t.name for t in child_request.tools) == ["delegate", "forecast"]
