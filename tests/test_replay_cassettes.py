"""A recorded session as a regression test of an agent: `export_cassette` writes it to a file,
`assert_replays` runs the agent against the file and passes while the agent does what was
recorded (every reply served from the cassette, no tool run), and fails naming the first
step where a changed agent parts from it, and why."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from temporalio.client import Client

from durable_agents import AgentClient, assert_replays, export_cassette
from durable_agents.activities.agents import Agent
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.base import ToolRegistry
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support.effect_tools import bump_tool, executions
from tests.support.helpers import start
from tests.support.replay_models import ByInstructions
from tests.test_session_replay import CHANGED, RECORD


async def test_a_cassette_passes_for_its_agent_and_fails_at_the_step_a_changed_agent_parts(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    tmp_path: Path,
) -> None:
    counted = tmp_path / "bumps"
    bump = bump_tool(counted)
    changed = Agent(name="elsewise", instructions="Bump zero, then bump two.", tools=[bump])
    recorded_model = ScriptedProvider.from_data(RECORD)
    model = ByInstructions(recorded_model, {"bump two": ScriptedProvider.from_data(CHANGED)})
    api = AgentClient(client, resources, tenant)
    cassette = tmp_path / "bump-twice.json"
    registry = ToolRegistry.of([bump])
    async with agent_worker(model, workspace, registry=registry, agents=(changed,)) as queue:
        recorded, handle = await start(client, resources, queue, "Bump twice.", tenant=tenant)
        assert (await asyncio.wait_for(handle.result(), 60)).status == "completed"
        await export_cassette(api, recorded, cassette)
        asked, ran = len(model.requests), executions(counted)

        report = await assert_replays(api, cassette, task_queue=queue)
        assert (report.replies_recorded, report.results_recorded) == (3, 2)
        assert (len(model.requests), executions(counted)) == (asked, ran)

        with pytest.raises(AssertionError) as failed:
            await assert_replays(api, cassette, agent="elsewise", task_queue=queue)
    assert "diverged at step 1: other arguments (bump: label)" in str(failed.value)
    assert "its first live reply: step 0" in str(failed.value)
    assert executions(counted) == ran  # its call not in the cassette was refused, not run

    written = json.loads(cassette.read_text())
    assert written["task"] == "Bump twice." and len(written["steps"]) == 3
    first = written["steps"][0]["calls"][0]
    assert (first["name"], first["arguments"]) == ("bump", {"label": "zero"})
    assert json.loads(first["result"]["content"])["how"] == "ran"
