"""A provider outage is outwaited, not fatal: the task says `waiting_model` with the last
error, attempt and next try while the model server is down, and goes on when it is back;
only the task's outage deadline ends it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowFailureError

from durable_agents.activities.providers.base import ModelReply, ModelRequest
from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import get_settings
from durable_agents.workflows.policies import MODEL_OTHER_ERROR_ATTEMPTS
from tests.conftest import AgentRunner
from tests.support.fake_openai import (
    FakeOpenAI,
    completion,
    fake_openai_server,  # noqa: F401 (the `server` fixture)
)
from tests.support.helpers import start
from tests.test_cli import agentctl

API_KEY = "sk-outage-test-key-1234567890"


@pytest.fixture
async def provider(server: FakeOpenAI) -> AsyncIterator[OpenAICompatibleProvider]:
    p = OpenAICompatibleProvider(base_url=server.url, api_key=API_KEY, model="gpt-x", timeout=5)
    yield p
    await p.aclose()


async def test_an_outage_longer_than_the_old_attempt_budget_is_outwaited_and_shown(
    server: FakeOpenAI,
    provider: OpenAICompatibleProvider,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server.fail(503, f"upstream overloaded (key {API_KEY})")
    # Small backoff through the setting a deployment would use; the deadline stays hours.
    monkeypatch.setenv("AGENT_MODEL_RETRY_MAX_INTERVAL_SECONDS", "0.1")
    async with agent_worker(provider, workspace) as queue:
        monkeypatch.setenv("AGENT_TASK_QUEUE", queue)
        get_settings.cache_clear()
        code, out, _ = await agentctl(capsys, "start", "Say hello.")
        assert code == 0
        session = out.strip()

        # Past the 8 attempts that used to fail the task for good.
        async with asyncio.timeout(60):
            while True:
                code, out, _ = await agentctl(capsys, "status", session)
                if "status=waiting_model" in out and len(server.requests) > 10:
                    break
                await asyncio.sleep(0.1)
        assert code == 0
        line = next(x for x in out.splitlines() if "waiting_model:" in x)
        attempt = int(line.split("attempt ")[1].split()[0])
        assert attempt > MODEL_OTHER_ERROR_ATTEMPTS
        assert "HTTP 503" in line and "upstream overloaded" in line
        assert "next try" in line and "gives up at" in line
        assert API_KEY not in out
        code, out, _ = await agentctl(capsys, "show", session)
        assert "waiting_model: model call attempt" in out and API_KEY not in out

        server.status = 200
        server.reply = completion({"role": "assistant", "content": "hello again"}, "stop")
        code, out, _ = await agentctl(capsys, "watch", session)
    assert code == 0 and out.splitlines()[-1] == "task ended: completed (unchecked)"
    row, items = await tasks.read_session(resources.sessions, tenant, session)
    assert row.status == "completed" and row.wait_detail is None
    assert [i.text for i in items if i.kind == "assistant_message"] == ["hello again"]


async def test_the_outage_deadline_fails_the_task_naming_it(
    server: FakeOpenAI,
    provider: OpenAICompatibleProvider,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    server.fail(503, "still down")
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(
            client,
            resources,
            queue,
            tenant=tenant,
            model_outage_seconds=2,
            model_retry_max_interval_seconds=0.2,
        )
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), 60)

    message = str(info.value.cause)
    assert "outage deadline of 2s" in message and "HTTP 503" in message
    row, items = await tasks.read_session(resources.sessions, tenant, session_id)
    assert row.status == "failed" and row.wait_detail is None
    assert items[-1].kind == "error" and "outage deadline" in items[-1].text


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("model_outage_seconds", 0),
        ("model_outage_seconds", float("nan")),
        ("model_retry_max_interval_seconds", -1),
        ("model_outage_seconds", 365 * 86400),
    ],
)
def test_outage_options_out_of_range_are_refused(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        tasks.TaskOptions(**{field: value})  # type: ignore[arg-type]


class _BuggyModel:
    """A provider with a bug: not an outage, so not outwaited."""

    name = "buggy"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.calls += 1
        raise KeyError("choices")

    async def aclose(self) -> None:
        return None


async def test_an_error_that_is_not_an_outage_still_stops_after_the_old_attempt_budget(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    model = _BuggyModel()
    async with agent_worker(model, workspace) as queue:
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, model_retry_max_interval_seconds=0.05
        )
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), 60)

    assert model.calls == MODEL_OTHER_ERROR_ATTEMPTS
    assert "KeyError" in str(info.value.cause)
    row, _ = await tasks.read_session(resources.sessions, tenant, session_id)
    assert row.status == "failed" and row.wait_detail is None
