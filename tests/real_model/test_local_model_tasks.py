"""Tasks end to end on a real model: Qwen2.5-Coder 1.5B on llama.cpp (`make test-real-model`).

What is asserted is the outcome a user checks, never the model's wording: the report names
every file, the answer holds the fact only the file holds, a malformed call is survived.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle

from durable_agents.activities.providers.base import ModelProvider
from durable_agents.activities.providers.factory import build_provider
from durable_agents.storage.models import ItemRow
from durable_agents.workers.demo.run import DEMO_TASK
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack.llama import LlamaServer
from durable_agents.workflows.agent import AgentWorkflow
from tests.conftest import AgentRunner
from tests.real_model.relay import relay, serving
from tests.support.fake_openai import answer, completion
from tests.support.helpers import (
    copy_demo_workspace,
    items_of,
    new_session_id,
    run_approving,
    session_root,
    start,
)

pytestmark = pytest.mark.real_model

TASK_SECONDS = 900
FACT = "PELICAN-7342"
ANSWER_TASK = "Read the file facts/launch.md and tell me the launch code word it gives."


def _final_answer(items: list[ItemRow]) -> str:
    answers = [i for i in items if i.kind == "assistant_message"]
    return answers[-1].text or "" if answers else ""


async def start_answer_task(
    client: Client, resources: Resources, queue: str, workspace: Path, tenant: str
) -> tuple[str, WorkflowHandle[AgentWorkflow, Any]]:
    """The read-and-answer task, its file in the session's workspace before it starts."""
    session_id = new_session_id()
    facts = session_root(workspace, tenant, session_id) / "facts"
    facts.mkdir()
    (facts / "launch.md").write_text(
        f"# Launch notes\n\nThe launch code word is {FACT}. Do not share it.\n"
    )
    return await start(
        client, resources, queue, ANSWER_TASK, tenant=tenant, max_steps=10, session_id=session_id
    )


def _transcript(items: list[ItemRow]) -> str:
    """The session as it went, an item a line (what a failure shows of the model's turns)."""
    lines = []
    for i in items:
        called = (i.data or {}).get("arguments", "")
        lines.append(f"{i.kind} {i.tool_name or ''} {(i.text or '')[:160]!r} {called}")
    return "\n".join(lines)


def _budget(llama: LlamaServer) -> dict[str, object]:
    settings = llama.model_settings()
    return settings.model_dump(include={"name", "context_tokens", "reply_tokens"}) | {
        "tool_result_tokens": settings.tool_result_tokens
    }


async def test_the_survey_task_writes_a_report_naming_every_file(
    llama: LlamaServer,
    local_provider: ModelProvider,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    async with agent_worker(local_provider, workspace, **_budget(llama)) as queue:
        session_id = new_session_id()
        root = copy_demo_workspace(session_root(workspace, tenant, session_id))
        sid, handle = await start(
            client, resources, queue, DEMO_TASK, tenant=tenant, max_steps=20, session_id=session_id
        )
        files = sorted(p.name for p in root.rglob("*") if p.is_file())
        result, _ = await run_approving(
            client, resources, sid, handle, tenant, within_seconds=TASK_SECONDS
        )
    assert result.status == "completed"
    written = root / "out" / "report.md"
    if not written.is_file():
        items = await items_of(resources, tenant, sid)
        pytest.fail(f"completed without out/report.md:\n{_transcript(items)}")
    report = written.read_text()
    missing = [name for name in files if name not in report]
    assert not missing, f"out/report.md does not name {missing}:\n{report}"


async def test_an_answer_holds_a_fact_only_the_file_holds(
    llama: LlamaServer,
    local_provider: ModelProvider,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    async with agent_worker(local_provider, workspace, **_budget(llama)) as queue:
        sid, handle = await start_answer_task(client, resources, queue, workspace, tenant)
        result, _ = await run_approving(
            client, resources, sid, handle, tenant, within_seconds=TASK_SECONDS
        )
    assert result.status == "completed"
    answer = _final_answer(await items_of(resources, tenant, sid))
    assert FACT in answer, answer


class FirstReplyMalformed:
    """The model's HTTP interface with one fault: its first reply is a read_file call whose
    arguments are cut-off JSON. Every later request goes to the real server unchanged."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.served = 0
        self.url = ""
        # What the server sent for each relayed request (shown when the test fails).
        self.relayed: list[bytes] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.served += 1
        if self.served == 1:
            call = {
                "id": "call_x",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "facts/launch.md'},
            }
            request_body = json.loads(body)
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            broken = completion(message, "tool_calls") | {"model": request_body.get("model", "")}
            return await answer(request, request_body, broken)  # streamed if asked to
        response, seen = await relay(request, self.upstream, body)
        self.relayed.append(seen)
        return response


@pytest.fixture
async def malformed_first(llama: LlamaServer) -> AsyncIterator[FirstReplyMalformed]:
    fake = FirstReplyMalformed(llama.base_url)
    async with serving(fake.handle, props_of=llama.base_url) as url:
        fake.url = url
        yield fake


async def test_a_task_recovers_from_a_malformed_first_tool_call(
    llama: LlamaServer,
    malformed_first: FirstReplyMalformed,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    settings = llama.model_settings().model_copy(update={"base_url": malformed_first.url})
    provider = build_provider(settings)
    try:
        async with agent_worker(provider, workspace, **_budget(llama)) as queue:
            sid, handle = await start_answer_task(client, resources, queue, workspace, tenant)
            try:
                result, _ = await run_approving(
                    client, resources, sid, handle, tenant, within_seconds=TASK_SECONDS
                )
            except WorkflowFailureError as failed:
                # Ended without a result (the step limit): what the model did, to read.
                shown = _transcript(await items_of(resources, tenant, sid))
                raise AssertionError(f"{failed.cause}\n{shown}") from failed
    finally:
        await provider.aclose()
    assert result.status == "completed"
    items = await items_of(resources, tenant, sid)
    first_result = next(i for i in items if i.kind == "tool_result")
    assert first_result.data.get("error_type"), "the malformed call was not reported as an error"
    assert malformed_first.served >= 2
    raw = "\n".join(r.decode(errors="replace")[:3000] for r in malformed_first.relayed[:2])
    assert FACT in _final_answer(items), f"{_transcript(items)}\nfirst replies relayed:\n{raw}"
