"""A task can ask for more approvals than its agent, never for fewer: a `start` key's
policies only add approvals (even "never" over a tool that asks by default, or over the
agent's own "always"); loosening is its own option, for the admin scope (or the
deployment's operator), and who loosened what is committed with the session."""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.client import Client

from durable_agents.activities.agents import Agent
from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.storage.sessions import SessionRepository
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.gateway import bearer, gateway_http, make_key
from tests.support.helpers import session_root, wait_for_pending

WRITE = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "hi"}}]},
    {"text": "done"},
]
READ = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
    {"text": "done"},
]
CAUTIOUS = Agent(
    name="cautious",
    instructions="Read carefully.",
    tools=builtin_tools("read_file"),
    approvals={"read_file": "always"},
)


async def _approvals(res: Resources, tenant: str, sid: str) -> dict[str, object] | None:
    async with res.sessions() as db:
        row = await SessionRepository(db, tenant).get(uuid.UUID(sid))
    return row.approvals


async def test_a_start_key_cannot_switch_a_tools_default_approval_off(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    key = await make_key(resources, tenant, "start", "read")
    async with (
        agent_worker(ScriptedProvider.from_data(WRITE), workspace) as queue,
        gateway_http(migrated, resources, client, queue=queue, workspace=workspace) as http,
    ):
        started = await http.post(
            "/v1/sessions",
            json={"text": "write", "approval_policies": {"write_file": "never"}},
            headers=bearer(key),
        )
        assert started.status_code == 201, started.text
        sid = started.json()["session_id"]
        # write_file asks by default: the task's "never" does not take that away.
        assert await wait_for_pending(client, sid) != []
        assert not (session_root(workspace, tenant, sid) / "x.txt").exists()

        loosen = await http.post(
            "/v1/sessions",
            json={"text": "write", "loosened_approvals": {"write_file": "never"}},
            headers=bearer(key),
        )
        assert loosen.status_code == 403, loosen.text
        assert "loosened_approvals needs the admin scope" in loosen.json()["error"]["message"]


async def test_a_task_policy_cannot_loosen_the_agents_own_approval(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    key = await make_key(resources, tenant, "start", "read")
    async with (
        agent_worker(ScriptedProvider.from_data(READ), workspace, agents=(CAUTIOUS,)) as queue,
        gateway_http(migrated, resources, client, queue=queue, workspace=workspace) as http,
    ):
        started = await http.post(
            "/v1/sessions",
            json={
                "text": "read",
                "agent": "cautious",
                "approval_policies": {"read_file": "never"},
            },
            headers=bearer(key),
        )
        assert started.status_code == 201, started.text
        sid = started.json()["session_id"]
        assert await wait_for_pending(client, sid) != []
        assert await _approvals(resources, tenant, sid) == {
            "policies": {"read_file": "never"},
            "loosened": {},
            "loosened_by": None,
        }


async def test_an_admin_loosening_runs_unasked_and_is_recorded_with_who_did_it(
    migrated: StackEndpoints,
    resources: Resources,
    client: Client,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    key = await make_key(resources, tenant, "admin", user="dana")
    async with (
        agent_worker(ScriptedProvider.from_data(WRITE), workspace) as queue,
        gateway_http(migrated, resources, client, queue=queue, workspace=workspace) as http,
    ):
        started = await http.post(
            "/v1/sessions",
            json={"text": "write", "loosened_approvals": {"write_file": "never"}},
            headers=bearer(key),
        )
        assert started.status_code == 201, started.text
        sid = started.json()["session_id"]
        handle = client.get_workflow_handle(f"agent-{sid}")
        await handle.result()
        assert (session_root(workspace, tenant, sid) / "x.txt").read_text() == "hi"
        assert await _approvals(resources, tenant, sid) == {
            "policies": {},
            "loosened": {"write_file": "never"},
            "loosened_by": "dana",
        }
