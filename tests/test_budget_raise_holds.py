"""What `agentctl budget raise` says is what happened: `resumed` only when the task goes on;
when another figure of its budget, or its tenant's freeze, still holds it, `raised` and what
holds it, in the park's own words."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.resources import Resources
from durable_agents.workflows.parks import FROZEN_WORDS
from tests.conftest import AgentRunner
from tests.support.helpers import agentctl, tenant_root
from tests.test_budgets import Runaway, _parked
from tests.test_quotas import _until


async def test_a_raise_says_resumed_only_when_nothing_else_holds_the_task(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = Runaway()
    (tenant_root(workspace, tenant) / "a.txt").write_text("alpha")
    async with agent_worker(model, workspace, workspace_scope="tenant") as queue:
        monkeypatch.setenv("AGENT_TASK_QUEUE", queue)
        code, out, err = await agentctl(capsys, "start", "read", "--budget", "tool_calls=1")
        assert code == 0, err
        session = out.strip()
        sid = uuid.UUID(session)
        await _parked(resources, tenant, sid)

        # Another figure raised: the tool calls still hold it.
        code, out, _ = await agentctl(capsys, "budget", "raise", session, "--seconds", "3600")
        assert code == 0
        assert out.startswith("raised; still held by budget reached: tool_calls 1 of 1; "), out
        await asyncio.sleep(1.0)
        assert len(model.keys) == 1  # it did not go on

        # The right figure, but the tenant is frozen meanwhile: the freeze holds it.
        code, _, _ = await agentctl(capsys, "tenant", "freeze")
        assert code == 0
        code, out, _ = await agentctl(capsys, "budget", "raise", session, "--tool-calls", "2")
        assert code == 0 and out.startswith(f"raised; still held by {FROZEN_WORDS}; "), out
        await _until(resources, tenant, str(sid), SessionStatus.FROZEN)
        assert len(model.keys) == 1

        code, _, _ = await agentctl(capsys, "tenant", "thaw")
        assert code == 0
        await _parked(resources, tenant, sid)  # went on, to its second tool call's limit
        code, out, _ = await agentctl(capsys, "budget", "raise", session, "--tool-calls", "3")
        assert code == 0 and out.startswith("resumed; ") and "tool_calls=3" in out, out
        await agentctl(capsys, "cancel", session)
