"""A model that keeps replying with nothing: one nudge, then the task ends as `no_answer`,
which agentctl status, show and watch all say."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.client import Client

from durable_agents.activities.nudges import EMPTY_REPLY_NUDGE
from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider
from durable_agents.workers.settings import get_settings
from durable_agents.workflows.contracts import AgentResult
from durable_agents.workflows.policies import workflow_id_for
from tests.conftest import AgentRunner
from tests.support.fake_openai import (
    FakeOpenAI,
    completion,
    fake_openai_server,  # noqa: F401 (the `server` fixture)
)
from tests.support.helpers import agentctl


async def test_two_empty_replies_in_a_row_end_the_task_as_no_answer(
    server: FakeOpenAI,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server.reply = completion({"role": "assistant", "content": "  \n"}, "stop")
    provider = OpenAICompatibleProvider(base_url=server.url, api_key=None, model="m", timeout=5)
    try:
        async with agent_worker(provider, workspace) as queue:
            monkeypatch.setenv("AGENT_TASK_QUEUE", queue)
            get_settings.cache_clear()
            code, out, _ = await agentctl(capsys, "start", "Say something.")
            assert code == 0
            session = out.strip()
            handle = client.get_workflow_handle(workflow_id_for(session), result_type=AgentResult)
            result = await asyncio.wait_for(handle.result(), 60)
            code, watched, _ = await agentctl(capsys, "watch", session)
            # While a worker runs, status also asks the workflow itself.
            status_code, status_out, _ = await agentctl(capsys, "status", session)
    finally:
        await provider.aclose()

    assert (result.status, result.final_item_id is not None) == ("no_answer", True)
    assert result.last_error and "empty" in result.last_error
    # Exactly one nudge: the second empty reply is the answer to it.
    assert len(server.requests) == 2
    assert server.requests[1].body["messages"][-1]["content"] == EMPTY_REPLY_NUDGE

    assert code == 0
    lines = watched.splitlines()
    assert lines[-1] == "task ended: no_answer"
    assert sum(EMPTY_REPLY_NUDGE[:30] in line for line in lines) == 1
    assert any("error" in line and "no answer" in line for line in lines)

    assert status_code == 0
    assert "status=no_answer" in status_out.splitlines()[0]
    assert "workflow: step=2 status=no_answer" in status_out
    assert "last error: no answer" in status_out

    code, out, _ = await agentctl(capsys, "show", session)
    assert code == 0 and "no_answer" in out
