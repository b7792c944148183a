"""`resume`: a failed or cancelled task continues from its last committed item in a new
run of the same workflow: nothing committed is repeated (no item twice, no tool run
twice, no approval asked twice) and what never happened runs."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError

from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.errors import SessionNotFound
from durable_agents.storage.models import ItemRow
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.fake_openai import (
    FakeOpenAI,
    completion,
    fake_openai_server,  # noqa: F401 (the `server` fixture)
)
from tests.support.helpers import items_of, session_root, start, wait_for_pending
from tests.test_cli import agentctl


@pytest.fixture
async def provider(server: FakeOpenAI) -> AsyncIterator[OpenAICompatibleProvider]:
    p = OpenAICompatibleProvider(base_url=server.url, api_key="sk-test", model="gpt-x", timeout=5)
    yield p
    await p.aclose()


def _write_and_read() -> dict[str, Any]:
    """One step asking for an approved write and a read that needs no approval."""
    calls = [
        ("write_file", {"path": "x.md", "content": "from the model"}),
        ("read_file", {"path": "a.txt"}),
    ]
    return completion(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"c{n}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for n, (name, args) in enumerate(calls)
            ],
        },
        "tool_calls",
    )


def _count(items: list[ItemRow], kind: str, call: str | None = None) -> int:
    return sum(1 for i in items if i.kind == kind and (call is None or i.tool_call_id == call))


async def _decisions(res: Resources, tenant: str, session_id: str) -> int:
    items = await items_of(res, tenant, session_id)
    return sum(1 for i in items if i.kind == "approval" and "approved" in i.data)


async def test_resume_after_a_failure_repeats_nothing_committed_and_asks_nobody_again(
    server: FakeOpenAI,
    provider: OpenAICompatibleProvider,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    sid = uuid.uuid4()
    root = session_root(workspace, tenant, sid)
    (root / "a.txt").write_text("alpha")
    server.queued = [_write_and_read()]
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        (call,) = await wait_for_pending(client, session_id)
        server.fail(400, "this request is refused")  # step 1 fails for good
        await verbs.approve(
            client, session_id, call, "test", sessions=resources.sessions, tenant_id=tenant
        )
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), 30)
        assert (root / "x.md").read_text() == "from the model"
        # Were the approved write run again, it would overwrite this.
        (root / "x.md").write_text("edited by a person since")

        server.status = 200
        server.reply = completion({"role": "assistant", "content": "all done"}, "stop")
        resumed = await verbs.resume(client, resources.sessions, tenant, session_id)
        # Nobody approves: a call asked again would park the task and time this out.
        result = await asyncio.wait_for(resumed.result(), 30)

    assert result.status == "completed"
    assert (root / "x.md").read_text() == "edited by a person since"
    items = await items_of(resources, tenant, session_id)
    assert _count(items, "assistant_message") == 2  # step 0 once, step 1 once
    assert _count(items, "tool_result") == 2
    assert await _decisions(resources, tenant, session_id) == 1
    assert len({i.idempotency_key for i in items}) == len(items)
    # The model was asked for step 0 once, step 1 twice (refused, then after the resume).
    assert len(server.requests) == 3
    row, _ = await tasks.read_session(resources.sessions, tenant, session_id)
    assert row.status == "completed"


async def test_resume_after_a_cancel_asks_the_undecided_call_and_runs_it_once(
    server: FakeOpenAI,
    provider: OpenAICompatibleProvider,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    sid = uuid.uuid4()
    root = session_root(workspace, tenant, sid)
    (root / "a.txt").write_text("alpha")
    server.queued = [_write_and_read()]
    server.reply = completion({"role": "assistant", "content": "all done"}, "stop")
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        await wait_for_pending(client, session_id)
        async with asyncio.timeout(20):  # the read needs no approval: it runs meanwhile
            while True:
                if _count(await items_of(resources, tenant, session_id), "tool_result"):
                    break
                await asyncio.sleep(0.05)
        assert (await verbs.cancel(client, resources.sessions, tenant, session_id)).cancelled
        assert (await asyncio.wait_for(handle.result(), 30)).status == "cancelled"
        row, _ = await tasks.read_session(resources.sessions, tenant, session_id)
        assert row.status == "cancelled"

        resumed = await verbs.resume(client, resources.sessions, tenant, session_id)
        (call,) = await wait_for_pending(client, session_id)  # never decided: asked
        await verbs.approve(
            client, session_id, call, "test", sessions=resources.sessions, tenant_id=tenant
        )
        result = await asyncio.wait_for(resumed.result(), 30)

    assert result.status == "completed"
    assert (root / "x.md").read_text() == "from the model"
    items = await items_of(resources, tenant, session_id)
    read_call = next(i.tool_call_id for i in items if i.tool_name == "read_file")
    assert _count(items, "tool_result", read_call) == 1
    assert _count(items, "tool_result", call) == 1
    assert _count(items, "assistant_message") == 2
    assert len(server.requests) == 2  # step 0 was not asked of the model again


def _reads(n: int) -> list[dict[str, object]]:
    return [{"tool_calls": [{"name": "list_dir", "arguments": {}}]} for _ in range(n)]


async def test_resume_is_refused_for_another_tenant_a_running_or_completed_task(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "write_file", "arguments": {"path": "x", "content": "x"}}]}]
    )
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        (call,) = await wait_for_pending(client, session_id)
        with pytest.raises(SessionNotFound):
            await verbs.resume(client, resources.sessions, "someone-else", session_id)
        with pytest.raises(tasks.TaskNotResumable, match="is running"):
            await verbs.resume(client, resources.sessions, tenant, session_id)
        code, _, err = await agentctl(capsys, "resume", session_id)
        assert code == 1 and err.strip() == (
            f"error: task {session_id} is running; only a stopped task resumes"
        )
        await verbs.approve(
            client, session_id, call, "test", sessions=resources.sessions, tenant_id=tenant
        )
        await asyncio.wait_for(handle.result(), 30)
        with pytest.raises(tasks.TaskNotResumable, match="is completed"):
            await verbs.resume(client, resources.sessions, tenant, session_id)


async def test_a_task_stopped_by_its_step_limit_resumes_with_a_higher_one(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    async with agent_worker(ScriptedProvider.from_data(_reads(3)), workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, max_steps=2)
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), 30)
        with pytest.raises(tasks.TaskNotResumable, match="--max-steps above 2"):
            await verbs.resume(client, resources.sessions, tenant, session_id)
        resumed = await verbs.resume(client, resources.sessions, tenant, session_id, max_steps=10)
        result = await asyncio.wait_for(resumed.result(), 30)

    assert result.status == "completed" and result.steps == 4
    items = await items_of(resources, tenant, session_id)
    assert _count(items, "assistant_message") == 4
    assert _count(items, "tool_result") == 3
