"""A call whose arguments were not JSON reaches no tool, typed or not (an MCP server's tool
is a plain Tool): the model gets InvalidArguments naming the tool and the shape to send."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from temporalio.client import Client

from durable_agents.activities.providers.base import ToolSpec
from durable_agents.activities.providers.errors import RAW_ARGUMENTS_KEY
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.base import Tool, ToolContext, ToolOutput, ToolRegistry
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support.helpers import items_of, start


async def test_raw_arguments_never_reach_a_plain_tool(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    received: list[dict[str, Any]] = []

    async def lookup(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        received.append(args)
        return ToolOutput(b"found", "text/plain")

    schema = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
    }
    plain = Tool(ToolSpec("lookup", "Look a word up.", schema), lookup, effect="read_only")
    registry = ToolRegistry.of([*builtin_tools(), plain])
    provider = ScriptedProvider.from_data(
        [
            {"tool_calls": [{"name": "lookup", "arguments": {RAW_ARGUMENTS_KEY: "query=x"}}]},
            {"tool_calls": [{"name": "lookup", "arguments": {"query": "x"}}]},
        ]
    )
    async with agent_worker(provider, workspace, registry=registry) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "completed"
    assert received == [{"query": "x"}]  # only the well-formed call ran
    results = [i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"]
    assert results[0].data["error_type"] == "InvalidArguments"
    told = next(m.content for m in provider.requests[1].messages if m.role == "tool")
    assert "lookup did not run" in told and "You sent: query=x" in told
    assert "Call lookup again now, with its arguments as one complete JSON object" in told
    assert '{"query": string (required), "limit": integer}' in told


async def test_a_call_the_tool_would_refuse_unrun_asks_nobody_to_approve_it(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    """Arguments that are not JSON, or that name what the tool does not take, are refused
    before the tool runs whatever a person decides: the call is not put to anyone."""
    provider = ScriptedProvider.from_data(
        [
            {
                "tool_calls": [
                    {"name": "write_file", "arguments": {RAW_ARGUMENTS_KEY: "path=out/a"}},
                    {"name": "write_file", "arguments": {"path": "out/a", "text": "x"}},
                ]
            },
            {"text": "done"},
        ]
    )
    policies = {"write_file": "always"}
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, approval_policies=policies
        )
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "completed"
    items = await items_of(resources, tenant, session_id)
    assert not [i for i in items if i.kind == "approval"]
    errors = [i.data.get("error_type") for i in items if i.kind == "tool_result"]
    assert errors == ["InvalidArguments", "InvalidArguments"]
    assert not (workspace / tenant / session_id / "out").exists()
