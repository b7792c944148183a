"""The loop's side of the effects contract: a call reported in doubt waits for a person's
decision to run it again (shown by `status`, decided by the call's id), and the model is
told what happened in one result per call. The dead attempt is the ledger row it leaves
(the real SIGKILL is tests/chaos/test_effects_sigkill.py); the worker caches no workflow,
so every step also replays."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.worker import Replayer

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.base import ToolRegistry
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.activities.tools.effects import RERUN_NOTE
from durable_agents.storage.tool_effects import ToolEffectRepository
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from durable_agents.workflows.agent import AgentWorkflow
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.effect_tools import bump_tool, executions
from tests.support.helpers import agentctl, items_of, start, wait_for_pending

HISTORIES = Path(__file__).parent / "histories"
SCRIPT = [{"tool_calls": [{"name": "bump", "arguments": {"label": "once"}}]}]


async def interrupted(res: Resources, tenant: str, sid: uuid.UUID) -> str:
    """The ledger row an attempt leaves when it dies after its claim: the call's key."""
    key = f"agent-{sid}:0:call_0_0"
    async with res.sessions() as db, db.begin():
        await ToolEffectRepository(db, tenant).claim(
            key, session_id=sid, tool_call_id="call_0_0", tool_name="bump"
        )
    return key


def told(provider: ScriptedProvider) -> list[str]:
    """The tool messages of the model's last request."""
    return [m.content for m in provider.requests[-1].messages if m.role == "tool"]


async def test_in_doubt_call_runs_again_only_after_approval_under_a_new_key(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    count = tmp_path / "count"
    registry = ToolRegistry.of([*builtin_tools(), bump_tool(count)])
    provider = ScriptedProvider.from_data(SCRIPT)
    sid = uuid.uuid4()
    key = await interrupted(resources, tenant, sid)
    async with agent_worker(provider, workspace, registry=registry) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        assert await wait_for_pending(client, session_id) == ["call_0_0"]
        live = await tasks.live_status(client, session_id)
        assert [(p.tool_call_id, p.rerun) for p in live.pending_approvals] == [("call_0_0", True)]
        code, out, _ = await agentctl(capsys, "status", session_id)
        assert code == 0 and "waiting for approval to run again (in doubt): call_0_0" in out
        assert executions(count) == {}, "ran again before anyone approved"
        await verbs.approve(
            client, session_id, "call_0_0", "ops", sessions=resources.sessions, tenant_id=tenant
        )
        result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    assert executions(count) == {f"{key}:rerun1": 1}
    (message,) = told(provider)
    assert message.startswith(RERUN_NOTE) and '"how": "ran"' in message
    items = await items_of(resources, tenant, session_id)
    decision = next(i for i in items if i.kind == "approval" and "approved" in i.data)
    assert decision.data["approved"] and decision.data["rerun"] == 1
    history = await handle.fetch_history()
    if os.environ.get("RECORD_HISTORIES"):
        (HISTORIES / "effect_in_doubt_rerun.json").write_text(history.to_json())
    replayed = await Replayer(workflows=[AgentWorkflow]).replay_workflow(history)
    assert replayed.replay_failure is None


@pytest.mark.parametrize(
    ("decide", "words"),
    [("reject", "It was not run again: rejected by ops"), ("timeout", "no decision within 1s")],
)
async def test_in_doubt_call_not_approved_keeps_the_in_doubt_result(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
    decide: str,
    words: str,
) -> None:
    count = tmp_path / "count"
    registry = ToolRegistry.of([*builtin_tools(), bump_tool(count)])
    provider = ScriptedProvider.from_data(SCRIPT)
    sid = uuid.uuid4()
    await interrupted(resources, tenant, sid)
    options: dict[str, Any] = {"approval_timeout_seconds": 1} if decide == "timeout" else {}
    async with agent_worker(provider, workspace, registry=registry) as queue:
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, session_id=sid, **options
        )
        if decide == "reject":
            await wait_for_pending(client, session_id)
            await verbs.reject(
                client,
                session_id,
                "call_0_0",
                "not twice",
                "ops",
                sessions=resources.sessions,
                tenant_id=tenant,
            )
        result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    assert executions(count) == {}
    (message,) = told(provider)
    assert "may or may not have taken effect" in message and words in message
    results = [i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"]
    assert [r.data.get("effect") for r in results] == ["in_doubt", "in_doubt"]


async def test_a_resumed_task_keeps_a_re_run_decision_and_asks_nobody_again(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    count = tmp_path / "count"
    registry = ToolRegistry.of([*builtin_tools(), bump_tool(count)])
    calls = [
        {"name": "bump", "arguments": {"label": "once"}},
        {"name": "write_file", "arguments": {"path": "a.txt", "content": "A"}},
    ]
    provider = ScriptedProvider.from_data([{"tool_calls": calls}])
    sid = uuid.uuid4()
    await interrupted(resources, tenant, sid)
    decide = {"sessions": resources.sessions, "tenant_id": tenant}
    async with agent_worker(provider, workspace, registry=registry) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        async with asyncio.timeout(20):
            while True:  # both calls wait: bump's re-run and write_file's first run
                if len((await tasks.live_status(client, session_id)).pending_approvals) == 2:
                    break
                await asyncio.sleep(0.05)
        await verbs.reject(client, session_id, "call_0_0", "not twice", "ops", **decide)
        # Stopped while write_file still waits: the re-run of bump was decided, it was not.
        await verbs.cancel(client, resources.sessions, tenant, session_id)
        assert (await asyncio.wait_for(handle.result(), 30)).status == "cancelled"

        resumed = await verbs.resume(client, resources.sessions, tenant, session_id)
        pending = await wait_for_pending(client, session_id)
        await asyncio.sleep(1)  # a question about bump would show by now as well
        live = await tasks.live_status(client, session_id)
        assert pending == ["call_0_1"]
        assert [(p.tool_call_id, p.rerun) for p in live.pending_approvals] == [("call_0_1", False)]
        await verbs.approve(client, session_id, "call_0_1", "ops", **decide)
        result = await asyncio.wait_for(resumed.result(), 30)

    assert result.status == "completed"
    assert executions(count) == {}
    items = await items_of(resources, tenant, session_id)
    bumps = [i for i in items if i.kind == "tool_result" and i.tool_call_id == "call_0_0"]
    assert [(r.data.get("effect"), r.data.get("declined")) for r in bumps] == [
        ("in_doubt", None),
        ("in_doubt", True),
    ]
    assert any("rejected by ops" in m for m in told(provider))
