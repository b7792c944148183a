"""A check that guides (`Check(guide=True)`): before each model step that follows tool
results it judges the workspace as it would an answer; while it fails, the reply must call
a tool and the reason follows the latest result, as a user turn of our words. Once it
passes, nothing is added and the model may answer. A check that read the answer cannot
guide (there is none yet), a check with a command may not (it would run every step), and a
start's check never does. The reply's request fingerprint is that of the request before
the guide: a replay whose tools are replayed, the workspace left as it was, finds its
recorded reply."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from durable_agents.activities.agents import Agent
from durable_agents.activities.check_guide import GUIDE_LEAD, guided
from durable_agents.activities.checks.runner import CheckFailure
from durable_agents.activities.checks.spec import Check, CheckContext, CheckSpecError
from durable_agents.activities.providers.base import ChatMessage, ModelRequest
from durable_agents.activities.providers.request_fingerprint import (
    REQUEST_KEY,
    request_fingerprint,
)
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.vocabulary.item_marks import CHECK_KEY
from durable_agents.vocabulary.previews import error_preview
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support.helpers import items_of, session_root, start

REASON = "out/report.md says nothing of pelicans: read alpha.txt, then write the report"


async def _says_pelicans(ctx: CheckContext) -> str | None:
    report = await ctx.read_text("out/report.md") or ""
    return None if "pelicans" in report else REASON


async def _answer_says_done(ctx: CheckContext) -> str | None:
    return None if "done" in ctx.answer.casefold() else "the answer does not say done"


GUIDED = Agent(
    "guided",
    "Report on alpha.txt.",
    tools=builtin_tools(),
    approvals={"write_file": "never"},
    check=Check(call=_says_pelicans, guide=True),
)
BY_ANSWER = Agent(
    "by-answer",
    "Say done.",
    tools=builtin_tools(),
    check=Check(call=_answer_says_done, guide=True),
)


def _write(report: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": "out/report.md", "content": report}}


async def _run(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    agent: Agent,
    replies: list[dict[str, Any]],
) -> tuple[str, Any, ScriptedProvider]:
    model = ScriptedProvider.from_data(replies)
    sid = uuid.uuid4()
    (session_root(workspace, tenant, sid) / "alpha.txt").write_text("Notes about pelicans")
    async with agent_worker(model, workspace, agents=(agent,)) as queue:
        _, handle = await start(
            client, resources, queue, tenant=tenant, session_id=sid, agent=agent.name
        )
        result = await asyncio.wait_for(handle.result(), 60)
    return str(sid), result, model


async def test_a_guide_holds_the_model_to_calls_with_the_reason_after_each_result_until_it_passes(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    read = {"name": "read_file", "arguments": {"path": "alpha.txt"}}
    replies = [
        {"tool_calls": [read]},
        {"tool_calls": [_write("alpha.txt: notes.")]},  # not yet
        {"tool_calls": [_write("alpha.txt: notes about pelicans.")]},
        {"text": "Report written."},
    ]
    sid, result, model = await _run(
        client, resources, agent_worker, workspace, tenant, GUIDED, replies
    )
    assert (result.status, result.checked) == ("completed", True)
    asked = model.requests
    # The first step follows the task, not a result: no guide there.
    assert [r.call_required for r in asked] == [False, True, True, False]
    told = ChatMessage(role="user", content=f"{GUIDE_LEAD}{REASON}")
    assert [r.messages[-1] == told for r in asked] == [False, True, True, False]
    assert asked[1].messages[-2].content == "Notes about pelicans"  # the result, as it was
    assert asked[3].messages[-1].role == "tool"  # passed: nothing added
    items = await items_of(resources, tenant, sid)
    # No answer was refused: nothing was written of the guide, and no attempt was spent.
    assert not [i for i in items if i.data.get(CHECK_KEY)]
    assert not [i for i in items if i.text and REASON in i.text]
    # Each reply committed the fingerprint of its request as it was before the guide.
    replies_rows = [i for i in items if i.kind == "assistant_message"]
    for row, request in zip(replies_rows, asked, strict=True):
        guided_here = request.messages[-1] == told
        unguided = request.messages[:-1] if guided_here else request.messages
        before = replace(request, messages=unguided, call_required=False)
        assert row.data[REQUEST_KEY] == request_fingerprint(before)


async def test_a_check_that_reads_the_answer_does_not_guide(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    replies = [
        {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
        {"text": "Done."},
    ]
    _, result, model = await _run(
        client, resources, agent_worker, workspace, tenant, BY_ANSWER, replies
    )
    assert (result.status, result.checked) == ("completed", True)
    assert [r.call_required for r in model.requests] == [False, False]
    assert "answer does not say" not in model.requests[1].messages[-1].content


def test_guided_adds_the_reason_only_after_a_tool_result_with_tools_offered() -> None:
    failure = CheckFailure("do the next thing", workspace_only=True)
    result = ChatMessage(role="tool", content="42", tool_call_id="c1")
    base = ModelRequest("m", [ChatMessage("user", "go"), result], [], idempotency_key="k")
    assert guided(base, failure) == base  # no tools to call
    spec = builtin_tools("read_file")[0].spec
    offered = replace(base, tools=[spec])
    told = guided(offered, failure)
    assert told.messages == [
        *offered.messages,
        ChatMessage("user", f"{GUIDE_LEAD}do the next thing"),
    ]
    assert told.call_required
    assert guided(offered, None) == offered
    # After a failed call its error says what to do: the call is still required, no words.
    failed = ChatMessage(role="tool", content=error_preview("NotFound", "no x"), tool_call_id="c2")
    after_error = replace(offered, messages=[*offered.messages, failed])
    assert guided(after_error, failure) == replace(after_error, call_required=True)
    after_user = replace(offered, messages=[ChatMessage("user", "go")])
    assert guided(after_user, failure) == after_user


def test_a_check_with_a_command_or_from_a_start_cannot_guide() -> None:
    with pytest.raises(CheckSpecError) as err:
        Check(command=["true"], guide=True)
    assert err.value.field == "check.guide"
    with pytest.raises(CheckSpecError) as err:
        Check.from_start({"files": ["out/report.md"], "guide": True})
    assert err.value.field == "check.guide"
