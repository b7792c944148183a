"""The public Python API (workers/api.py) and loading agents by module path, end to end on
the real stack with the offline model."""

from __future__ import annotations

import asyncio
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from durable_agents import Agent, ToolContext, connect, serve, tool
from durable_agents.storage.sessions import SessionRepository
from durable_agents.workers.agent_loading import AgentLoadError, load_agents
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import get_settings
from tests.support.helpers import agentctl


@tool(effect="read_only")
async def forecast(ctx: ToolContext, place: str) -> str:
    """Tomorrow's weather."""
    return f"sunny in {place}"


@pytest.fixture
def api_env(cli_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """The environment of a program using the API: its own queue, the offline model."""
    monkeypatch.setenv("AGENT_TASK_QUEUE", f"api-{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("AGENT_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("MODEL_PROVIDER", "offline")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


async def test_start_await_the_answer_and_approve_through_the_api(
    api_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = Agent(name="weather", instructions="Forecast.", tools=[forecast])
    careful = Agent(
        name="careful",
        instructions="Ask first.",
        tools=[forecast],
        approvals={"forecast": "always"},
    )
    async with serve([plain, careful]), connect() as client:
        task = await client.start(plain, "forecast place=Oslo")
        done = await task.result()
        assert (done.status, done.answer, done.error) == (
            "completed",
            "forecast: sunny in Oslo",
            None,
        )
        assert done.steps == 2

        asked = await client.start(careful, "forecast place=Bergen")
        pending = await asked.wait_for_approval()
        assert pending.name == "forecast"
        await asked.approve(pending.tool_call_id, by="me")
        assert (await asked.result()).answer == "forecast: sunny in Bergen"

        refused = await client.start("careful", "forecast place=Rome")
        pending = await refused.wait_for_approval()
        await refused.reject(pending.tool_call_id, "not today")
        answer = (await refused.result()).answer or ""
        assert "rejected by api: not today" in answer
        # Any device reads the same task by its id.
        again = await client.task(task.session_id).result()
        assert again.answer == done.answer
    # agentctl shows which agent the session runs and the definition its turn recorded.
    code, out, _ = await agentctl(capsys, "show", task.session_id)
    assert code == 0 and "agent weather" in out
    assert f"weather {plain.fingerprint()[:12]}" in out


async def test_a_failed_task_s_result_says_why(api_env: None) -> None:
    async with serve(), connect() as client:
        task = await client.start("nobody", "hi")
        result = await task.result()
    assert (result.status, result.answer) == ("failed", None)
    assert result.error is not None and "no agent named 'nobody'" in result.error


async def test_serve_refuses_a_bad_agent_module_before_it_starts(
    api_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_DEFINITIONS", "no_such_module_here:AGENTS")
    get_settings.cache_clear()
    with pytest.raises(AgentLoadError, match="cannot import 'no_such_module_here'"):
        async with serve():
            pass


@pytest.fixture
def agents_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"agents_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            from durable_agents import Agent
            ONE = Agent(name="one", instructions="x")
            AGENTS = [ONE, Agent(name="two", instructions="y")]
            BY_NAME = {"one": ONE}
            def make():
                return ONE
            NOT_AGENTS = 42
            TWICE = [ONE, ONE]
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_agents_load_from_a_module_path(agents_module: str) -> None:
    for attr, names in (("AGENTS", ["one", "two"]), ("BY_NAME", ["one"]), ("make", ["one"])):
        assert [a.name for a in load_agents(f"{agents_module}:{attr}")] == names
    for spec, why in (
        ("nocolon", "expected module:ATTR"),
        (f"{agents_module}:MISSING", "has no 'MISSING'"),
        (f"{agents_module}:NOT_AGENTS", "is a int, not Agents"),
        (f"{agents_module}:TWICE", "two agents are named 'one'"),
        ("surely_not_a_module:X", "cannot import"),
    ):
        with pytest.raises(AgentLoadError, match=why):
            load_agents(spec)


async def test_agentctl_start_refuses_an_agent_the_definitions_lack_before_committing(
    cli_env: None,
    agents_module: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    resources: Resources,
    tenant: str,
) -> None:
    monkeypatch.setenv("AGENT_DEFINITIONS", f"{agents_module}:AGENTS")
    get_settings.cache_clear()
    code, out, err = await agentctl(capsys, "start", "--agent", "three", "hi")
    assert code == 1 and not out
    assert "no agent named 'three'" in err and "one, two" in err
    async with resources.sessions() as db:
        assert await SessionRepository(db, tenant).recent() == []  # nothing committed
    code, _, err = await agentctl(capsys, "worker", "--agents", "nocolon")
    assert code == 1 and "expected module:ATTR" in err


async def test_a_worker_serves_the_agents_agent_definitions_names(
    api_env: None, agents_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_DEFINITIONS", f"{agents_module}:AGENTS")
    get_settings.cache_clear()
    async with serve(), connect() as client:
        served = await (await client.start("two", "hello")).result()
        # The Python API is a door like agentctl: a name the definitions lack is refused
        # before anything commits (a plain Temporal start finds out from the worker).
        with pytest.raises(AgentLoadError, match="no agent named 'three'"):
            await client.start("three", "hello")
    assert served.status == "completed"


async def test_connect_starts_tasks_with_the_settings_it_was_given_not_the_environments(
    api_env: None,
) -> None:
    """`connect(settings=...)` is the door's settings for every task it starts: here a queue
    the environment does not name, which only the worker serving those settings polls."""
    mine = get_settings().model_copy(deep=True)
    mine.agent = mine.agent.model_copy(update={"task_queue": f"own-{uuid.uuid4().hex[:8]}"})
    plain = Agent(name="weather", instructions="Forecast.", tools=[forecast])
    async with serve([plain], settings=mine), connect(settings=mine) as client:
        task = await client.start(plain, "forecast place=Oslo")
        done = await asyncio.wait_for(task.result(), 60)  # never taken on another queue
    assert (done.status, done.answer) == ("completed", "forecast: sunny in Oslo")
