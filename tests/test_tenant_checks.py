"""Every update and signal checks the caller's tenant, and a missing tenant is refused like
a wrong one; the library refuses another tenant's session before it touches Temporal."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from durable_agents.activities.providers.base import ModelReply, ModelRequest
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.errors import SessionNotFound
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import (
    ApproveInput,
    CancelInput,
    RejectInput,
    SendMessageInput,
)
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.helpers import items_of, session_root, start, wait_for_pending

WRITE = [{"tool_calls": [{"name": "write_file", "arguments": {"path": "a.md", "content": "A"}}]}]


async def _refused_type(coro: Any) -> str:
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await coro
    cause = info.value.cause
    assert isinstance(cause, ApplicationError)
    return str(cause.type)


@pytest.mark.parametrize("caller", [None, "someone-else"])
async def test_updates_without_the_tasks_tenant_are_refused(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    caller: str | None,
) -> None:
    async with agent_worker(ScriptedProvider.from_data(WRITE), workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        (call,) = await wait_for_pending(client, session_id)
        # Straight to Temporal, as a client that skips our library would.
        for update, arg in (
            (AgentWorkflow.approve, ApproveInput(call, tenant_id=caller)),
            (AgentWorkflow.reject, RejectInput(call, tenant_id=caller)),
            (AgentWorkflow.cancel, CancelInput(tenant_id=caller)),
        ):
            assert await _refused_type(handle.execute_update(update, arg)) == "TenantMismatch"
        assert (await tasks.live_status(client, session_id)).pending_approvals
        await verbs.approve(
            client, session_id, call, "owner", sessions=resources.sessions, tenant_id=tenant
        )
        assert (await asyncio.wait_for(handle.result(), 30)).status == "completed"
    assert (session_root(workspace, tenant, session_id) / "a.md").read_text() == "A"


async def test_another_tenants_session_is_not_found_by_the_library(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    other = f"{tenant}-b"
    theirs: dict[str, Any] = {"sessions": resources.sessions, "tenant_id": other}
    async with agent_worker(ScriptedProvider.from_data(WRITE), workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        (call,) = await wait_for_pending(client, session_id)
        for attempt in (
            verbs.approve(client, session_id, call, "mallory", **theirs),
            verbs.reject(client, session_id, call, "no", "mallory", **theirs),
            verbs.send_message(client, resources.sessions, other, session_id, "hi"),
            verbs.cancel(client, resources.sessions, other, session_id),
        ):
            with pytest.raises(SessionNotFound):
                await attempt
        assert (await tasks.live_status(client, session_id)).status == "waiting_approval"
        assert not [i for i in await items_of(resources, tenant, session_id) if "mallory" in i.text]
        await verbs.cancel(client, resources.sessions, tenant, session_id)
        result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "cancelled"
    row, _ = await tasks.read_session(resources.sessions, tenant, session_id)
    assert row.status == "cancelled"
    assert not (session_root(workspace, tenant, session_id) / "a.md").exists()


class _HeldProvider(ScriptedProvider):
    """Answers only once `release` is set, so a signal can arrive mid-call."""

    def __init__(self, release: asyncio.Event) -> None:
        super().__init__([])
        self.release = release
        self.entered = asyncio.Event()

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.entered.set()
        await self.release.wait()
        return await super().complete(request)


@pytest.mark.parametrize(("sender", "steps"), [(None, 1), ("someone-else", 1), ("own", 2)])
async def test_a_signal_from_another_tenant_does_not_wake_the_loop(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    sender: str | None,
    steps: int,
) -> None:
    release = asyncio.Event()
    provider = _HeldProvider(release)
    async with agent_worker(provider, workspace) as queue:
        _, handle = await start(client, resources, queue, tenant=tenant)
        await asyncio.wait_for(provider.entered.wait(), 20)
        caller = tenant if sender == "own" else sender
        # A follow-up "arrives" while the model answers: counted, it costs one more step.
        await handle.signal(AgentWorkflow.send_message, SendMessageInput("x", 99, caller))
        await asyncio.sleep(0.5)
        release.set()
        result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    assert result.steps == steps
