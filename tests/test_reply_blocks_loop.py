"""Issue 30 through the whole loop, with a compatible server that returns the model's text as
it wrote it (the remote LLM faked at its HTTP interface): a call in echo-looking tags is run,
a call to a tool that does not exist is answered with the real tools, and a reply of empty
markup is nudged, never taken as the answer."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from temporalio.client import Client

from durable_agents.activities.nudges import EMPTY_REPLY_NUDGE
from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.fake_openai import (
    FakeOpenAI,
    calls,
    fake_openai_server,  # noqa: F401 (the `server` fixture)
    says,
)
from tests.support.helpers import items_of, session_root, start, wait_for_pending

REPORT = "# Survey\n\n- README.md\n- notes.md\n"
WRITE = {"name": "write_file", "arguments": {"path": "out/report.md", "content": REPORT}}


async def test_a_write_file_call_inside_tool_response_writes_the_report(
    server: FakeOpenAI,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    server.queued = [
        calls({"name": "list_files", "arguments": {"path": "."}}),
        # The survey's second reply as captured from Qwen2.5-Coder 1.5B.
        says(f"<tool_response>\n{json.dumps(WRITE)}\n</tool_response>"),
    ]
    server.reply = says("The report is in out/report.md.")
    provider = OpenAICompatibleProvider(base_url=server.url, api_key=None, model="m", timeout=10)
    try:
        async with agent_worker(provider, workspace) as queue:
            session_id, handle = await start(client, resources, queue, tenant=tenant)
            root = session_root(workspace, tenant, session_id)
            (root / "README.md").write_text("hello\n")
            (call_id,) = await wait_for_pending(client, session_id, 60)
            await verbs.approve(
                client, session_id, call_id, "test", sessions=resources.sessions, tenant_id=tenant
            )
            result = await asyncio.wait_for(handle.result(), 60)
    finally:
        await provider.aclose()

    assert result.status == "completed"
    assert (root / "out" / "report.md").read_text() == REPORT
    assert len(server.requests) == 3  # list, write, answer: no nudge in between
    items = await items_of(resources, tenant, session_id)
    assert [i.tool_name for i in items if i.kind == "tool_call"] == ["list_files", "write_file"]


async def test_a_fenced_call_to_a_tool_that_does_not_exist_is_answered_with_the_real_ones(
    server: FakeOpenAI,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    server.queued = [says('```json\n{"name": "read_files", "arguments": {"paths": ["a"]}}\n```')]
    server.reply = says("Sorry: there is one file.")
    provider = OpenAICompatibleProvider(base_url=server.url, api_key=None, model="m", timeout=10)
    try:
        async with agent_worker(provider, workspace) as queue:
            session_id, handle = await start(client, resources, queue, tenant=tenant)
            result = await asyncio.wait_for(handle.result(), 60)
    finally:
        await provider.aclose()

    assert result.status == "completed" and len(server.requests) == 2
    told = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert len(told) == 1
    assert "UnknownTool" in told[0]["content"] and "'read_files'" in told[0]["content"]
    assert "read_file" in told[0]["content"].split("the tools are:")[1]
    items = await items_of(resources, tenant, session_id)
    final = next(i for i in items if str(i.id) == result.final_item_id)
    assert final.text == "Sorry: there is one file."


async def test_a_reply_of_empty_markup_is_nudged_not_taken_as_the_answer(
    server: FakeOpenAI,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    server.queued = [says("<tools></tools>")]
    server.reply = says("There is nothing in the workspace.")
    provider = OpenAICompatibleProvider(base_url=server.url, api_key=None, model="m", timeout=10)
    try:
        async with agent_worker(provider, workspace) as queue:
            _, handle = await start(client, resources, queue, tenant=tenant)
            result = await asyncio.wait_for(handle.result(), 60)
    finally:
        await provider.aclose()

    assert result.status == "completed" and len(server.requests) == 2
    assert server.requests[1].body["messages"][-1]["content"] == EMPTY_REPLY_NUDGE
