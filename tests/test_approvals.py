"""Approvals arrive as Temporal updates; validators refuse bad decisions with clear errors."""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import (
    Client,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.helpers import items_of, start, wait_for_pending


def _script() -> ScriptedProvider:
    return ScriptedProvider.from_data(
        [
            {
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": "out/a.md", "content": "A"}},
                    {"name": "write_file", "arguments": {"path": "out/b.md", "content": "B"}},
                ]
            },
            {"tool_calls": [{"name": "list_dir", "arguments": {"path": "out"}}]},
        ]
    )


async def _refused(coro: object) -> ApplicationError:
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await coro  # type: ignore[misc]
    cause = info.value.cause
    assert isinstance(cause, ApplicationError)
    return cause


async def test_validators_refuse_unknown_and_second_decisions_and_rejection_reaches_model(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="durable_agents.workers.client.decisions")
    provider = _script()
    async with agent_worker(provider, workspace, sandbox="strict") as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        ours: dict[str, Any] = {"sessions": resources.sessions, "tenant_id": tenant}
        pending = await wait_for_pending(client, session_id)
        assert sorted(pending) == ["call_0_0", "call_0_1"]

        unknown = await _refused(verbs.approve(client, session_id, "call_9_9", "alice", **ours))
        assert unknown.type == "UnknownToolCall" and "call_9_9" in unknown.message
        # A call AgentState does not hold is refused at once, not asked again.
        assert not [r for r in caplog.records if "asking again" in r.getMessage()]

        await verbs.approve(client, session_id, "call_0_0", "alice", **ours)
        again = await _refused(verbs.approve(client, session_id, "call_0_0", "alice", **ours))
        assert again.type == "AlreadyDecided"
        flip = await _refused(
            verbs.reject(client, session_id, "call_0_0", "changed my mind", "bob", **ours)
        )
        assert flip.type == "AlreadyDecided"

        await verbs.reject(client, session_id, "call_0_1", "b.md is not wanted", "bob", **ours)
        result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    root = workspace / tenant / session_id
    assert (root / "out/a.md").read_text() == "A"
    assert not (root / "out/b.md").exists()
    # The model was told about the rejection as the call's result, and carried on.
    second = provider.requests[1]
    told = {m.tool_call_id: m.content for m in second.messages if m.role == "tool"}
    assert "rejected by bob" in told["call_0_1"] and "b.md is not wanted" in told["call_0_1"]
    assert '"already_applied": false' in told["call_0_0"]
    assert len(provider.requests) == 3

    items = await items_of(resources, tenant, session_id)
    decisions = {
        i.tool_call_id: i.data for i in items if i.kind == "approval" and "approved" in i.data
    }
    assert decisions["call_0_0"]["approved"] is True
    assert decisions["call_0_0"]["decided_by"] == "alice"
    # The request bob's words were staged in: what tells his decision from another.
    assert uuid.UUID(decisions["call_0_1"].pop("request_id"))
    assert decisions["call_0_1"] == {
        "approved": False,
        "decided_by": "bob",
        "reason": "b.md is not wanted",
        "step": 0,
        "device_id": None,
    }


async def test_a_decision_whose_rpc_timed_out_is_asked_again_not_made_twice(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The update reaches the workflow but the client gives up waiting (a busy worker).
    real = WorkflowHandle.execute_update
    sent: list[str | None] = []

    async def slow_once(self: WorkflowHandle[Any, Any], *args: Any, **kwargs: Any) -> Any:
        sent.append(kwargs.get("id"))
        result = await real(self, *args, **kwargs)
        if len(sent) == 1:
            raise WorkflowUpdateRPCTimeoutOrCancelledError()
        return result

    monkeypatch.setattr(WorkflowHandle, "execute_update", slow_once)
    async with agent_worker(_script(), workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        ours: dict[str, Any] = {"sessions": resources.sessions, "tenant_id": tenant}
        await wait_for_pending(client, session_id)
        decided = await verbs.approve(client, session_id, "call_0_0", "alice", **ours)
        assert len(sent) == 2 and sent[0] == sent[1]  # asked again, same update
        assert decided.tool_call_id == "call_0_0" and decided.approved
        again = await _refused(verbs.approve(client, session_id, "call_0_0", "alice", **ours))
        assert again.type == "AlreadyDecided"  # a new decision is still a second one
        await verbs.reject(client, session_id, "call_0_1", "no", "bob", **ours)
        assert (await asyncio.wait_for(handle.result(), 30)).status == "completed"
    approvals = [
        i
        for i in await items_of(resources, tenant, session_id)
        if i.kind == "approval" and "approved" in i.data
    ]
    assert sorted(i.tool_call_id or "" for i in approvals) == ["call_0_0", "call_0_1"]


async def test_decisions_on_a_finished_task_are_refused(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data([{"text": "nothing to do"}])
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        ours: dict[str, Any] = {"sessions": resources.sessions, "tenant_id": tenant}
        await handle.result()
    with pytest.raises(tasks.TaskNotRunning, match=r"is not running \(completed\)"):
        await verbs.approve(client, session_id, "call_0_0", "alice", **ours)


async def test_approval_that_never_comes_times_out_and_the_model_is_told(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "write_file", "arguments": {"path": "x.md", "content": "x"}}]}]
    )
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, approval_timeout_seconds=1
        )
        result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    assert not (workspace / tenant / session_id / "x.md").exists()
    told = next(m for m in provider.requests[1].messages if m.role == "tool")
    assert "rejected by timeout" in told.content and "no decision within 1s" in told.content
    items = await items_of(resources, tenant, session_id)
    decision = next(i for i in items if i.kind == "approval")
    assert decision.data["decided_by"] == "timeout" and decision.data["approved"] is False
