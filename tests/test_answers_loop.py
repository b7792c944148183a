"""An answer is an answer: the loop against a fake OpenAI-compatible server whose model
writes its tool calls as text, replies with nothing, or calls tools wrongly."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from durable_agents.activities.nudges import EMPTY_REPLY_NUDGE
from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider
from durable_agents.workers.resources import Resources
from durable_agents.workflows.contracts import AgentResult
from tests.conftest import AgentRunner
from tests.support.fake_openai import (
    FakeOpenAI,
    calls,
    fake_openai_provider,  # noqa: F401 (the `provider` fixture)
    fake_openai_server,  # noqa: F401 (the `server` fixture)
    says,
)
from tests.support.helpers import items_of, session_root, start

ANSWER = "The file says: contents of A."
READ_A = {"name": "read_file", "arguments": {"path": "a.txt"}}


@pytest.fixture
def run(
    server: FakeOpenAI,
    provider: OpenAICompatibleProvider,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> Any:
    """Run one task to its end against the queued replies, then `ANSWER` for ever."""

    async def go(*replies: dict[str, Any]) -> tuple[AgentResult, str]:
        server.queued = list(replies)
        server.reply = says(ANSWER)
        sid = uuid.uuid4()
        (session_root(workspace, tenant, sid) / "a.txt").write_text("contents of A")
        async with agent_worker(provider, workspace) as queue:
            session_id, handle = await start(
                client, resources, queue, "What does a.txt say?", tenant=tenant, session_id=sid
            )
            return await asyncio.wait_for(handle.result(), 60), session_id

    return go


async def final_text(
    resources: Resources, tenant: str, session_id: str, result: AgentResult
) -> str:
    items = await items_of(resources, tenant, session_id)
    return next(i.text for i in items if str(i.id) == result.final_item_id)


async def tool_results(resources: Resources, tenant: str, session_id: str) -> list[str]:
    return [
        i.text for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"
    ]


@pytest.mark.parametrize(
    "written",
    [
        f"<tool_call>\n{json.dumps(READ_A)}\n</tool_call>",
        f"```json\n{json.dumps(READ_A)}\n```",
    ],
    ids=["hermes-tag", "fenced-json"],
)
async def test_a_tool_call_written_as_text_runs_and_the_task_ends_with_the_real_answer(
    run: Any, server: FakeOpenAI, resources: Resources, tenant: str, written: str
) -> None:
    result, session_id = await run(says(written))

    assert result.status == "completed"
    assert await final_text(resources, tenant, session_id, result) == ANSWER
    assert await tool_results(resources, tenant, session_id) == ["contents of A"]
    # The server is shown the call as a call, answered by its result.
    second = server.requests[1].body["messages"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "read_file"
    assert (second[-1]["role"], second[-1]["content"]) == ("tool", "contents of A")


async def test_an_empty_reply_is_nudged_once_and_the_next_answer_completes(
    run: Any, server: FakeOpenAI, resources: Resources, tenant: str
) -> None:
    # The empty reply comes after a tool error, as with the small models that were tried.
    result, session_id = await run(calls({"name": "grep", "arguments": {}}), says(""))

    assert result.status == "completed"
    assert await final_text(resources, tenant, session_id, result) == ANSWER
    nudges = [i for i in await items_of(resources, tenant, session_id) if i.data.get("nudge")]
    assert [(n.kind, n.role, n.text) for n in nudges] == [
        ("user_message", "user", EMPTY_REPLY_NUDGE)
    ]
    assert server.requests[-1].body["messages"][-1] == {
        "role": "user",
        "content": EMPTY_REPLY_NUDGE,
    }


async def test_unknown_tool_error_lists_the_real_tools(
    run: Any, resources: Resources, tenant: str
) -> None:
    result, session_id = await run(calls({"name": "cat", "arguments": {"path": "a.txt"}}))

    assert result.status == "completed"
    (error,) = await tool_results(resources, tenant, session_id)
    assert error.startswith("error (UnknownTool): there is no tool named 'cat'; the tools are: ")
    listed = error.split("the tools are: ")[1].split(", ")
    assert "read_file" in listed and "write_file" in listed and listed == sorted(listed)


async def test_an_argument_the_schema_does_not_allow_is_reported(
    run: Any, resources: Resources, tenant: str
) -> None:
    result, session_id = await run(
        calls({"name": "read_file", "arguments": {"path": "a.txt", "encoding": "latin-1"}}),
        calls(READ_A),
    )

    assert result.status == "completed"
    bad, good = await tool_results(resources, tenant, session_id)
    assert bad.startswith("error (InvalidArguments): unknown argument 'encoding'")
    assert "'path'" in bad
    assert good == "contents of A"


async def test_an_argument_delegate_does_not_allow_is_reported(
    run: Any, resources: Resources, tenant: str
) -> None:
    result, session_id = await run(
        calls({"name": "delegate", "arguments": {"task": "Read a.txt.", "priority": "high"}})
    )

    assert result.status == "completed"
    (error,) = await tool_results(resources, tenant, session_id)
    assert error.startswith("error (InvalidArguments): ")
    assert error.endswith("delegate takes only 'task' and 'agent'")
