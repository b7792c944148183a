"""A task or follow-up over the inline limit is stored as an artifact (upload, verify, then
commit) with an inline preview, and the model sees it as an excerpt naming its sha256,
after the system prompt and the task, which it can never push out of the context."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from durable_agents.workflows.contracts import PREVIEW_CHARS
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.helpers import (
    artifact_count,
    committed_rows,
    items_of,
    s3_sha256,
    start,
    wait_for_pending,
)

SYSTEM = "You are the system prompt of this test."


def _long_text(lines: int) -> str:
    return "".join(f"line {n} of a long text the user pasted\n" for n in range(lines))


async def test_a_long_message_is_an_artifact_and_the_model_sees_prompt_task_and_an_excerpt(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    text = _long_text(6_000)  # ~250 KB: over the 32 KiB inline limit, under the 1 MiB one
    sha = hashlib.sha256(text.encode()).hexdigest()
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "write_file", "arguments": {"path": "a.md", "content": "A"}}]}]
    )
    async with agent_worker(provider, workspace, system_prompt=SYSTEM) as queue:
        session_id, handle = await start(client, resources, queue, "the task", tenant=tenant)
        await wait_for_pending(client, session_id)
        row = await verbs.send_message(
            client, resources.sessions, tenant, session_id, text, store=resources.store
        )
        await verbs.approve(
            client, session_id, "call_0_0", "alice", sessions=resources.sessions, tenant_id=tenant
        )
        assert (await asyncio.wait_for(handle.result(), 30)).status == "completed"

    # Committed as a preview plus a verified artifact the session needs for resume.
    assert row.kind == "user_message" and row.artifact_id is not None
    assert row.data["artifact"]["sha256"] == sha and len(row.text) <= PREVIEW_CHARS
    assert text.startswith(row.text.removesuffix("…"))
    assert await s3_sha256(resources, row.data["artifact"]["key"]) == sha
    assert await artifact_count(resources, tenant, sha) == 1
    stored = next(i for i in await items_of(resources, tenant, session_id) if i.id == row.id)
    assert stored.tokens < 500

    messages = provider.requests[1].messages
    assert messages[0].role == "system" and messages[0].content == SYSTEM
    users = [m.content for m in messages if m.role == "user"]
    assert users[0] == "the task"
    excerpt, note = users[-1].split("\n[truncated: ")
    assert len(excerpt) > 10_000 and text.startswith(excerpt)
    assert f"full message: artifact sha256:{sha} ({len(text)} bytes)" in note


async def test_a_long_task_is_an_artifact_and_the_first_step_sees_its_excerpt(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    text = "The task: summarise what follows.\n" + _long_text(3_000)
    sha = hashlib.sha256(text.encode()).hexdigest()
    provider = ScriptedProvider.from_data([{"text": "summarised"}])
    async with agent_worker(provider, workspace, system_prompt=SYSTEM) as queue:
        options = tasks.TaskOptions(tenant_id=tenant, task_queue=queue)
        handle = await tasks.start_task(
            client, resources.sessions, text, options, store=resources.store
        )
        assert (await asyncio.wait_for(handle.result(), 30)).status == "completed"

    task = (await items_of(resources, tenant, handle.id.removeprefix("agent-")))[0]
    assert task.artifact_id is not None and task.data["artifact"]["sha256"] == sha
    messages = provider.requests[0].messages
    assert [m.role for m in messages] == ["system", "user"]
    assert messages[0].content == SYSTEM
    excerpt, note = messages[1].content.split("\n[truncated: ")
    assert excerpt.startswith("The task: summarise") and text.startswith(excerpt)
    assert f"sha256:{sha}" in note


async def test_a_long_task_without_the_artifact_store_is_refused_before_committing(
    client: Client, resources: Resources, tenant: str
) -> None:
    options = tasks.TaskOptions(tenant_id=tenant, task_queue="nobody")
    with pytest.raises(ValueError, match=r"AGENT_INLINE_MESSAGE_BYTES.*artifact store"):
        await tasks.start_task(client, resources.sessions, _long_text(2_000), options)
    assert await committed_rows(resources, tenant) == {"sessions": 0, "items": 0, "artifacts": 0}
