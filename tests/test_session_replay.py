"""`replay`: a recorded task run again from its own record. With its agent unchanged every
reply is served from the record (the model is not asked) and every call's recorded result
is replayed (no tool runs again), and the report says "no divergence"; a changed agent
parts from the record at the step it changed, and the report says why; a tool named live
runs under the replay's own key, and a call neither recorded nor live is refused, not run.
The recorded session is never written, and every door refuses what it cannot replay the
same way, writing nothing."""

from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path

import pytest
from sqlalchemy import update
from temporalio.client import Client

from durable_agents import AgentClient
from durable_agents.activities.agents import Agent
from durable_agents.activities.policies.task_rules import InvalidTaskInput
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tool_run import ToolActivities
from durable_agents.activities.tools.base import ToolRegistry
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.errors import SessionNotFound
from durable_agents.storage.items import NewItem
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.storage.replays import NotReplayable
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.agent_loading import AgentLoadError
from durable_agents.workers.client import tasks
from durable_agents.workers.client.replays import ReplayReport, ReplayRequest
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.client.tenant_controls import freeze
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import get_settings
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.effect_tools import bump_tool, executions
from tests.support.gateway import bearer, gateway_http, make_key, poll
from tests.support.helpers import agentctl, session_count, start
from tests.support.replay_models import ByInstructions
from tests.support.tool_calls import new_call, run
from tests.test_fork_lineage import World, rows_of

# The recorded task: bump "zero", bump "one", answer.
RECORD = [
    {"tool_calls": [{"name": "bump", "arguments": {"label": "zero"}}]},
    {"tool_calls": [{"name": "bump", "arguments": {"label": "one"}}]},
    {"text": "done"},
]
# A changed agent's model: the same first call, then other arguments.
CHANGED = [
    {"tool_calls": [{"name": "bump", "arguments": {"label": "zero"}}]},
    {"tool_calls": [{"name": "bump", "arguments": {"label": "two"}}]},
    {"text": "done"},
]
AGENTS = [Agent(name="elsewise", instructions="Bump zero, then bump two.")]
PROMPT = "Bump what you are asked to."


async def _replayed(
    service: TaskService, client: Client, tenant: str, request: ReplayRequest
) -> ReplayReport:
    replay = await service.replay(verbs.operator(tenant), request)
    await asyncio.wait_for(tasks.task_handle(client, replay).result(), 60)
    return await service.replay_report(verbs.operator(tenant), replay)


async def _recorded(
    client: Client, resources: Resources, queue: str, tenant: str
) -> tuple[str, dict[str, object]]:
    recorded, handle = await start(client, resources, queue, "Bump twice.", tenant=tenant)
    assert (await asyncio.wait_for(handle.result(), 60)).status == "completed"
    return recorded, await rows_of(resources, tenant, uuid.UUID(recorded))


async def test_an_unchanged_agent_is_served_its_record_and_runs_no_tool_again(
    migrated: StackEndpoints,
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    tmp_path: Path,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counted = tmp_path / "bumps"
    model = ScriptedProvider.from_data(RECORD)
    registry = ToolRegistry.of([bump_tool(counted)])
    service = verbs.service(client, resources.sessions, resources.store)
    async with agent_worker(model, workspace, registry=registry) as queue:
        recorded, before = await _recorded(client, resources, queue, tenant)
        asked, ran = len(model.requests), executions(counted)
        request = ReplayRequest(recorded, options={"task_queue": queue})
        report = await _replayed(service, client, tenant, request)
        # agentctl waits for its own replay and prints the same report.
        monkeypatch.setenv("AGENT_TASK_QUEUE", queue)
        get_settings.cache_clear()
        code, out, _ = await agentctl(capsys, "replay", recorded)
        # And the gateway starts one, whose report a reader follows.
        owner = await make_key(resources, tenant, "start", "read")
        async with gateway_http(migrated, resources, client, queue=queue) as http:
            started = await http.post(
                f"/v1/sessions/{recorded}/replay", json={}, headers=bearer(owner)
            )
            assert started.status_code == 201, started.text
            url = f"/v1/sessions/{started.json()['session_id']}/replay-report"
            over_http = await poll(
                lambda: http.get(url, headers=bearer(owner)), lambda r: r.json()["ended"]
            )

    assert report.ended and report.status == "completed"
    assert report.divergence is None
    assert (report.steps, report.recorded_steps) == (3, 3)
    assert (report.replies_recorded, report.replies_live, report.first_live) == (3, 0, None)
    assert (report.results_recorded, report.results_live, report.results_refused) == (2, 0, 0)
    assert len(model.requests) == asked  # the model was not asked again
    assert executions(counted) == ran  # nor did bump run again, under any key
    assert await rows_of(resources, tenant, uuid.UUID(recorded)) == before
    # The replayed results are the record's objects, by reference.
    _, theirs = await tasks.read_session(resources.sessions, tenant, recorded)
    _, mine = await tasks.read_session(resources.sessions, tenant, report.session_id)
    assert _artifacts(mine) == _artifacts(theirs) and len(_artifacts(mine)) == 2
    assert code == 0, out
    assert "no divergence" in out and "replies: 3 from the record, 0 live" in out
    code, out, _ = await agentctl(capsys, "replay-report", report.session_id)
    assert code == 0 and "no divergence" in out and "2 replayed, 0 live, 0 refused" in out
    body = over_http.json()
    assert (body["divergence"], body["replies_recorded"], body["recorded_id"]) == (
        None,
        3,
        recorded,
    )


def _artifacts(items: list[ItemRow]) -> list[uuid.UUID]:
    return [i.artifact_id for i in items if i.kind == ItemKind.TOOL_RESULT and i.artifact_id]


async def test_a_changed_agent_diverges_where_it_changed_and_a_call_not_recorded_is_refused(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    tmp_path: Path,
) -> None:
    counted = tmp_path / "bumps"
    bump = bump_tool(counted)
    other = bump_tool(tmp_path / "others", name="tally")
    changed = ScriptedProvider.from_data(CHANGED)
    model = ByInstructions(ScriptedProvider.from_data(RECORD), {"bump two": changed})
    agents = (
        Agent(name="elsewise", instructions="Bump zero, then bump two.", tools=[bump]),
        Agent(name="tallier", instructions=PROMPT, tools=[other]),
    )
    service = verbs.service(client, resources.sessions, resources.store)
    registry = ToolRegistry.of([bump])
    worker = agent_worker(model, workspace, registry=registry, agents=agents, system_prompt=PROMPT)
    async with worker as q:
        recorded, before = await _recorded(client, resources, q, tenant)
        ran = executions(counted)
        request = ReplayRequest(recorded, "elsewise", options={"task_queue": q})
        elsewise = await _replayed(service, client, tenant, request)
        request = ReplayRequest(recorded, "tallier", options={"task_queue": q})
        tallier = await _replayed(service, client, tenant, request)

    # Step 0 asks the same call (the model was asked: another system prompt) and is served
    # its recorded result; step 1 asks other arguments, which the record has no result of.
    assert elsewise.divergence is not None
    assert str(elsewise.divergence) == "step 1: other arguments (bump: label)"
    assert (elsewise.first_live, elsewise.first_live_why) == (0, "system prompt")
    assert (elsewise.replies_recorded, elsewise.replies_live) == (0, 3)
    assert (elsewise.results_recorded, elsewise.results_refused) == (1, 1)
    assert executions(counted) == ran  # the refused call did not run
    _, items = await tasks.read_session(resources.sessions, tenant, elsewise.session_id)
    refused = [i for i in items if i.data.get("error_type") == "NotRecorded"]
    assert [r.tool_call_id for r in refused] == ["call_1_0"]
    assert "--live bump" in refused[0].text
    # Without bump among its tools, the same call fails as in any session.
    assert tallier.divergence is not None and tallier.first_live_why == "tools"
    assert str(tallier.divergence).startswith("step 0: another result (bump: error UnknownTool")
    assert await rows_of(resources, tenant, uuid.UUID(recorded)) == before


async def test_a_live_tool_runs_under_the_replays_own_key(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
    tmp_path: Path,
) -> None:
    counted = tmp_path / "bumps"
    model = ScriptedProvider.from_data(RECORD)
    service = verbs.service(client, resources.sessions, resources.store)
    registry = ToolRegistry.of([bump_tool(counted)])
    async with agent_worker(model, workspace, registry=registry) as queue:
        recorded, before = await _recorded(client, resources, queue, tenant)
        request = ReplayRequest(recorded, live_tools=["bump"], options={"task_queue": queue})
        report = await _replayed(service, client, tenant, request)

    replay = report.session_id
    assert executions(counted) == {
        f"agent-{recorded}:0:call_0_0": 1,
        f"agent-{recorded}:1:call_1_0": 1,
        f"agent-{replay}:0:call_0_0": 1,
        f"agent-{replay}:1:call_1_0": 1,
    }
    # Its result names the replay's key: step 0 is served from the record, then parts.
    assert str(report.divergence) == "step 0: another result (bump: its content differs)"
    assert (report.replies_recorded, report.first_live, report.first_live_why) == (1, 1, "messages")
    assert (report.results_recorded, report.results_live, report.results_refused) == (0, 2, 0)
    assert await rows_of(resources, tenant, uuid.UUID(recorded)) == before


async def test_every_door_refuses_a_replay_it_cannot_make_and_writes_nothing(
    migrated: StackEndpoints,
    client: Client,
    resources: Resources,
    tenant: str,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    world = World(resources, tenant, random.Random(5))
    recorded = str(await world.task())
    empty = uuid.uuid4()
    async with agent_state(resources.sessions, tenant, write=True) as st:
        await st.sessions.create(empty, title="task", model_config={})
        await st.items.append(NewItem(empty, ItemKind.USER_MESSAGE, "user", f"{empty}:t"))
        await st.sessions.set_status(empty, "completed")
    running = await world.task()
    async with agent_state(resources.sessions, tenant, write=True) as st:
        await st.sessions.set_status(running, "running")
    before = await rows_of(resources, tenant, uuid.UUID(recorded))
    count = await session_count(resources, tenant)
    service = verbs.service(client, resources.sessions, resources.store)
    operator = verbs.operator(tenant)

    with pytest.raises(NotReplayable, match=f"session {empty} has no model step to replay"):
        await service.replay(operator, ReplayRequest(str(empty)))
    with pytest.raises(NotReplayable, match="is running; a task is replayed once it has ended"):
        await service.replay(operator, ReplayRequest(str(running)))
    with pytest.raises(InvalidTaskInput, match="no tool named 'nosuch' to run live"):
        await service.replay(operator, ReplayRequest(recorded, live_tools=["nosuch"]))
    with pytest.raises(SessionNotFound):
        await service.replay(verbs.operator(f"{tenant}-x"), ReplayRequest(recorded))
    defined = get_settings().model_copy(deep=True)
    defined.agent = defined.agent.model_copy(
        update={"definitions": "tests.test_session_replay:AGENTS"}
    )
    with pytest.raises(AgentLoadError, match="no agent named 'nobody'"):
        await TaskService(client, resources.sessions, resources.store, defined).replay(
            operator, ReplayRequest(recorded, "nobody")
        )
    code, _, err = await agentctl(capsys, "replay", recorded, "--live", "nosuch")
    assert code == 1 and "no tool named 'nosuch' to run live" in err
    api = AgentClient(client, resources, tenant)
    with pytest.raises(InvalidTaskInput, match="no tool named 'nosuch' to run live"):
        await api.task(recorded).replay(live=["nosuch"])
    code, _, err = await agentctl(capsys, "replay-report", recorded)
    assert (code, err) == (1, f"error: session {recorded} is no replay\n")

    owner = await make_key(resources, tenant, "start")
    reader = await make_key(resources, tenant, "read")
    intruder = await make_key(resources, f"{tenant}-x", "admin")
    async with gateway_http(migrated, resources, client) as http:
        url = f"/v1/sessions/{recorded}/replay"
        no_steps = await http.post(f"/v1/sessions/{empty}/replay", json={}, headers=bearer(owner))
        not_live = await http.post(url, json={"live_tools": ["nosuch"]}, headers=bearer(owner))
        no_scope = await http.post(url, json={}, headers=bearer(reader))
        theirs = await http.post(url, json={}, headers=bearer(intruder))
        report = await http.get(f"/v1/sessions/{recorded}/replay-report", headers=bearer(reader))
        their_report = await http.get(
            f"/v1/sessions/{recorded}/replay-report", headers=bearer(intruder)
        )
    assert no_steps.status_code == 409 and no_steps.json()["error"]["type"] == "conflict"
    assert not_live.status_code == 400 and "nosuch" in not_live.text
    assert no_scope.status_code == 403
    assert (theirs.status_code, their_report.status_code) == (404, 404)
    assert report.status_code == 409

    assert await rows_of(resources, tenant, uuid.UUID(recorded)) == before
    assert await session_count(resources, tenant) == count
    async with agent_state(resources.sessions, tenant) as st:
        assert await st.sessions.forks(uuid.UUID(recorded)) == []


async def test_a_replays_served_call_passes_the_gate_a_frozen_tenant_gets_none(
    resources: Resources, tenant: str, tmp_path: Path
) -> None:
    """Each tool call passes the kill switch, one a replay would serve from its record too:
    the call is closed by the gate, and no result (served or refused) is written."""
    inp = await new_call(resources, tenant, "bump", {"label": "a"})
    async with agent_state(resources.sessions, tenant, write=True) as st:
        await st.db.execute(
            update(SessionRow)
            .where(SessionRow.id == uuid.UUID(inp.session_id))
            .values(replay={"of": str(uuid.uuid4()), "live_tools": []})
        )
    await freeze(resources.sessions, tenant, "operator")
    registry = ToolRegistry.of([bump_tool(tmp_path / "bumps")])
    acts = ToolActivities(resources.sessions, resources.store, registry, workspace=tmp_path)
    outcome = await run(acts, inp)
    assert outcome.closed is not None and outcome.item_id == ""
    assert not executions(tmp_path / "bumps")
    async with agent_state(resources.sessions, tenant) as st:
        rows = await st.items.for_tool_call(uuid.UUID(inp.session_id), inp.tool_call_id)
    assert [r.kind for r in rows] == [ItemKind.TOOL_CALL]
