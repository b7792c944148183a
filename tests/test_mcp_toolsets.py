"""MCP tools on the real stack: a FastMCP server over stdio and over streamable HTTP, its
tools called by a scripted model through run_tool with every guarantee a built-in has."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.base import ToolRegistry
from durable_agents.activities.tools.mcp_servers import McpServer
from durable_agents.activities.tools.mcp_toolset import McpToolsets
from durable_agents.storage.models import ItemRow
from durable_agents.workers.resources import Resources
from durable_agents.workflows.policies import TOOL_RETRY
from tests.conftest import AgentRunner
from tests.mcp_servers.toolbox import PNG
from tests.support import verbs
from tests.support.helpers import items_of, s3_sha256, start, stored_key, wait_for_pending
from tests.support.mcp import recorded, toolbox_http, toolbox_stdio


@asynccontextmanager
async def _mcp_worker(
    agent_worker: AgentRunner, servers: list[McpServer], script: list[dict[str, Any]], ws: Path
) -> AsyncIterator[tuple[str, ScriptedProvider]]:
    provider = ScriptedProvider.from_data(script)
    async with McpToolsets(servers) as toolsets:
        registry = ToolRegistry.of(toolsets.tools())
        async with agent_worker(provider, ws, registry=registry) as queue:
            yield queue, provider


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _results(items: list[ItemRow]) -> dict[str, ItemRow]:
    return {i.tool_name or "": i for i in items if i.kind == "tool_result"}


async def test_stdio_and_http_mcp_results_commit_verified_with_the_key_in_meta(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    record = tmp_path / "record.jsonl"
    script = [
        _call("box__make_report", title="Q3", lines=2),
        _call("web__picture"),
        {"text": "done"},
    ]
    with toolbox_http("web", record, tmp_path / "http.log") as web:
        servers: list[McpServer] = [toolbox_stdio("box", record), web]
        async with _mcp_worker(agent_worker, servers, script, workspace) as (queue, _):
            session_id, handle = await start(client, resources, queue, tenant=tenant)
            await handle.result()

    results = _results(await items_of(resources, tenant, session_id))
    report = json.dumps({"title": "Q3", "body": ["line 0", "line 1"]}).encode()
    for name, body, content_type in (
        ("box__make_report", report, "application/json"),
        ("web__picture", PNG, "image/png"),
    ):
        row = results[name]
        assert row.artifact_id is not None and "error_type" not in row.data
        info = row.data["artifact"]
        assert info["content_type"] == content_type
        assert info["sha256"] == hashlib.sha256(body).hexdigest()
        # The committed ref resolves to the very bytes the server sent.
        assert await s3_sha256(resources, stored_key(resources, row)) == info["sha256"]
    # Each server received its call once, with the call's idempotency key in `_meta`.
    calls = recorded(record)
    assert [(c["tool"], c["key"]) for c in calls] == [
        ("make_report", results["box__make_report"].idempotency_key),
        ("picture", results["web__picture"].idempotency_key),
    ]


async def test_policy_named_server_dot_tool_makes_an_mcp_call_wait_for_approval(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    record = tmp_path / "record.jsonl"
    script = [_call("box__echo", text="hello"), _call("box__picture"), {"text": "done"}]
    servers: list[McpServer] = [toolbox_stdio("box", record)]
    async with _mcp_worker(agent_worker, servers, script, workspace) as (queue, _):
        policies = {"box.echo": "always", "box.*": "never"}
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, approval_policies=policies
        )
        pending = await wait_for_pending(client, session_id)
        assert recorded(record) == []  # nothing ran before the decision
        await verbs.approve(
            client, session_id, pending[0], "alice", sessions=resources.sessions, tenant_id=tenant
        )
        await handle.result()
    # The echo waited for alice; `box.*` let the picture run unasked (no second approval).
    assert [c["tool"] for c in recorded(record)] == ["echo", "picture"]
    items = await items_of(resources, tenant, session_id)
    assert {i.tool_call_id for i in items if i.kind == "approval"} == {pending[0]}


async def test_an_mcp_is_error_result_reaches_the_model_as_an_error_and_the_run_goes_on(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    record = tmp_path / "record.jsonl"
    script = [_call("box__refuse", reason="no budget"), {"text": "understood"}]
    servers: list[McpServer] = [toolbox_stdio("box", record)]
    async with _mcp_worker(agent_worker, servers, script, workspace) as (queue, provider):
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        await handle.result()
    row = _results(await items_of(resources, tenant, session_id))["box__refuse"]
    assert row.data["error_type"] == "McpToolError" and row.artifact_id is None
    assert "refused: no budget" in row.text
    # Not retried: a tool's own error is an answer.
    assert len(recorded(record, "refuse")) == 1
    seen = "\n".join(m.content for m in provider.requests[-1].messages if m.role == "tool")
    assert "refused: no budget" in seen


async def test_a_server_that_dies_mid_call_is_retried_on_a_new_one_then_an_error_result(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    """Every attempt's server exits mid-call: each retry spawns a new one (same key), the
    call ends as an error result in our words, and the next call works again."""
    record = tmp_path / "record.jsonl"
    script = [_call("box__crash"), _call("box__echo", text="after"), {"text": "done"}]
    servers: list[McpServer] = [toolbox_stdio("box", record)]
    async with _mcp_worker(agent_worker, servers, script, workspace) as (queue, _):
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        await handle.result()
        history = await handle.fetch_history()
    results = _results(await items_of(resources, tenant, session_id))
    crash = results["box__crash"]
    assert crash.data["error_type"] == "ToolFailed"
    crashes = recorded(record, "crash")
    assert len(crashes) == TOOL_RETRY.maximum_attempts
    assert {c["key"] for c in crashes} == {crash.idempotency_key}
    assert "error_type" not in results["box__echo"].data
    # What history says of the failures is our fixed words.
    failures = [
        e.activity_task_failed_event_attributes.failure.message
        for e in history.events
        if e.HasField("activity_task_failed_event_attributes")
    ]
    assert set(failures) == {"MCP server box unreachable (McpError)"}
