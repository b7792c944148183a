"""Issue 41 through the whole loop: replies that are no answer (bare arguments, example calls,
a reply cut at its limit) are nudged in words for what they were, never taken as the task's
final answer; a call written inside prose runs at the first step. The model is a compatible
server that returns the text as the small model wrote it (faked at its HTTP interface)."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from durable_agents.activities.context.assembly import SHOWN_RAW_CHARS
from durable_agents.activities.nudges import (
    CUT_AT_LIMIT_NUDGE,
    EXAMPLE_CALLS_NUDGE,
    bare_arguments_nudge,
)
from durable_agents.activities.providers.errors import CUT_ARGUMENTS_KEY, RAW_ARGUMENTS_KEY
from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider
from durable_agents.workers.resources import Resources
from durable_agents.workflows.contracts import AgentResult
from durable_agents.workflows.policies import workflow_id_for
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.fake_openai import (
    FakeOpenAI,
    calls,
    completion,
    fake_openai_provider,  # noqa: F401 (the `provider` fixture)
    fake_openai_server,  # noqa: F401 (the `server` fixture)
    says,
)
from tests.support.helpers import (
    decoded_payloads,
    items_of,
    session_root,
    start,
    wait_for_pending,
)
from tests.test_non_answers import EXAMPLE_STEPS, READ_TWICE

DESCRIPTION = "# A\n\nThe file says: contents of A.\n"
WRITE = {"path": "out/desc.md", "content": DESCRIPTION}
READ_A = {"name": "read_file", "arguments": {"path": "a.txt"}}
ANSWER = "Done: out/desc.md describes a.txt."


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
    """Run one task to its end against the queued replies, then `ANSWER` for ever,
    approving each call that asks; (result, session id, workspace root)."""

    async def go(*replies: dict[str, Any], approvals: int = 0) -> tuple[AgentResult, str, Path]:
        server.queued = list(replies)
        server.reply = says(ANSWER)
        sid = uuid.uuid4()
        root = session_root(workspace, tenant, sid)
        (root / "a.txt").write_text("contents of A")
        async with agent_worker(provider, workspace) as queue:
            session_id, handle = await start(
                client,
                resources,
                queue,
                "Describe a.txt in out/desc.md.",
                tenant=tenant,
                session_id=sid,
            )
            for _ in range(approvals):
                (call_id,) = await wait_for_pending(client, session_id, 60)
                await verbs.approve(
                    client,
                    session_id,
                    call_id,
                    "test",
                    sessions=resources.sessions,
                    tenant_id=tenant,
                )
            return await asyncio.wait_for(handle.result(), 60), session_id, root

    return go


def nudges_sent(server: FakeOpenAI) -> list[str]:
    """The nudges the model was shown: user turns after the task's first."""
    last = server.requests[-1].body["messages"]
    return [m["content"] for m in last if m["role"] == "user"][1:]


async def test_bare_write_file_arguments_are_nudged_by_name_and_the_next_call_writes_the_file(
    run: Any, server: FakeOpenAI, client: Client, resources: Resources, tenant: str
) -> None:
    result, session_id, root = await run(
        calls(READ_A),
        says("```json\n" + json.dumps(WRITE) + "\n```"),
        # Told which tools those could be the arguments of, the model calls one (as text).
        says("```json\n" + json.dumps({"name": "write_file", "arguments": WRITE}) + "\n```"),
        approvals=1,
    )

    assert result.status == "completed"
    assert (root / "out" / "desc.md").read_text() == DESCRIPTION
    told = nudges_sent(server)
    # append_file takes the same path and content: both are named.
    assert told == [bare_arguments_nudge(["write_file", "append_file"])]
    assert "write_file or append_file" in told[0]
    items = await items_of(resources, tenant, session_id)
    assert [i.tool_name for i in items if i.kind == "tool_call"] == ["read_file", "write_file"]
    # The bare arguments stay in the conversation as the model wrote them, marked.
    bare = next(i for i in items if i.data.get("non_answer"))
    assert bare.kind == "assistant_message" and json.dumps(WRITE) in bare.text
    looks_like = ["write_file", "append_file"]
    assert (bare.data["non_answer"], bare.data["looks_like"]) == ("bare_arguments", looks_like)
    nudge = next(i for i in items if i.data.get("nudge"))
    assert (nudge.role, nudge.data["nudge"]) == ("user", "bare_arguments")
    final = next(i for i in items if str(i.id) == result.final_item_id)
    assert final.text == ANSWER
    # History holds the code, never what the model wrote.
    history = await client.get_workflow_handle(workflow_id_for(session_id)).fetch_history()
    payloads = decoded_payloads(history)
    assert '"non_answer":"bare_arguments"' in payloads
    assert '"reason":"bare_arguments"' in payloads
    assert "The file says" not in payloads and "out/desc.md" not in payloads


async def test_example_calls_are_not_the_answer_and_nothing_of_them_runs(
    run: Any, server: FakeOpenAI, resources: Resources, tenant: str
) -> None:
    result, session_id, _ = await run(says(EXAMPLE_STEPS), calls(READ_A))

    assert result.status == "completed"
    assert nudges_sent(server) == [EXAMPLE_CALLS_NUDGE]
    items = await items_of(resources, tenant, session_id)
    # Only the call the model made after the nudge ran; none of its examples did.
    assert [(i.tool_name, i.data["arguments"]) for i in items if i.kind == "tool_call"] == [
        ("read_file", {"path": "a.txt"})
    ]
    final = next(i for i in items if str(i.id) == result.final_item_id)
    assert final.text == ANSWER


async def test_a_reply_cut_at_its_limit_twice_ends_the_task_as_no_answer(
    run: Any, server: FakeOpenAI
) -> None:
    cut = completion({"role": "assistant", "content": "The file a.txt says that the"}, "length")
    result, _, _ = await run(cut, cut)

    assert (result.status, result.last_error) == (
        "no_answer",
        "no answer: the model's reply was empty or no answer again after it was told so",
    )
    assert len(server.requests) == 2
    assert nudges_sent(server) == [CUT_AT_LIMIT_NUDGE]


async def test_a_call_written_twice_in_prose_runs_once_at_the_first_step(
    run: Any, server: FakeOpenAI, resources: Resources, tenant: str
) -> None:
    twice = READ_TWICE.replace("README.md", "a.txt")
    result, session_id, _ = await run(says(twice))

    assert result.status == "completed" and len(server.requests) == 2
    items = await items_of(resources, tenant, session_id)
    assert [i.text for i in items if i.kind == "tool_result"] == ["contents of A"]
    final = next(i for i in items if str(i.id) == result.final_item_id)
    assert final.text == ANSWER


async def test_a_call_cut_at_the_limit_is_told_as_cut_and_shown_again_short(
    run: Any, server: FakeOpenAI, resources: Resources, tenant: str
) -> None:
    # What the 1.5B wrote to its token limit: one line over and over, in the call's JSON.
    runaway = '{"path": "out/desc.md", "content": "# A\\n' + "- a.txt: a file.\\n" * 200
    cut = completion(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "write_file", "arguments": runaway},
                }
            ],
        },
        "length",
    )
    # The cut call is refused before it runs, so nobody is asked about it; the next asks.
    result, session_id, root = await run(
        cut, calls({"name": "write_file", "arguments": WRITE}), approvals=1
    )

    assert result.status == "completed"
    assert (root / "out" / "desc.md").read_text() == DESCRIPTION
    items = await items_of(resources, tenant, session_id)
    first = next(i for i in items if i.kind == "tool_call")
    assert first.data["arguments"] == {RAW_ARGUMENTS_KEY: runaway, CUT_ARGUMENTS_KEY: True}
    # The next request: the cut call (over SHOWN_RAW_CHARS) shown again empty, its result
    # saying it was cut and that the lines repeated, without a word of what it wrote.
    assert len(runaway) > SHOWN_RAW_CHARS
    after = server.requests[1].body["messages"]
    shown = next(m for m in after if m.get("tool_calls"))["tool_calls"][0]["function"]
    assert json.loads(shown["arguments"]) == {RAW_ARGUMENTS_KEY: "", CUT_ARGUMENTS_KEY: True}
    told = next(m for m in after if m["role"] == "tool")["content"]
    assert "reached its output limit before the call's arguments ended" in told
    assert "it wrote the same lines again and again" in told
    assert "a.txt: a file" not in told
