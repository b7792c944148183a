"""Each session's tools see only their own workspace root, unless a scope shares one."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.models import ItemRow
from durable_agents.storage.sessions import SessionRepository
from durable_agents.storage.workspaces import PROJECTS_DIR, TENANT_DIR
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support.helpers import items_of, start

SECRET = "tenant A's secret plan"


def _write_then_read() -> ScriptedProvider:
    """Task "WRITE" writes notes/plan.md; task "READ" reads the same relative path."""
    write = {"name": "write_file", "arguments": {"path": "notes/plan.md", "content": SECRET}}
    read = {"name": "read_file", "arguments": {"path": "notes/plan.md"}}
    return ScriptedProvider.from_data(
        [], by_task={"WRITE": [{"tool_calls": [write]}], "READ": [{"tool_calls": [read]}]}
    )


async def _run(
    client: Client, res: Resources, queue: str, text: str, tenant: str, project: str | None = None
) -> tuple[str, ItemRow]:
    session_id, handle = await start(
        client, res, queue, text, tenant=tenant, project=project,
        loosened_approvals={"write_file": "never"}, loosened_by="test",
    )  # fmt: skip
    assert (await asyncio.wait_for(handle.result(), 60)).status == "completed"
    results = [i for i in await items_of(res, tenant, session_id) if i.kind == "tool_result"]
    assert len(results) == 1
    return session_id, results[0]


def _read_ok(result: ItemRow) -> bool:
    if result.data.get("error_type") is not None:
        assert result.data["error_type"] == "FileNotFound", result.text
        return False
    assert SECRET in result.text
    return True


async def test_another_tenant_on_the_same_worker_cannot_read_a_tenants_file(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path
) -> None:
    tenant_a, tenant_b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    async with agent_worker(_write_then_read(), workspace) as queue:
        writer, _ = await _run(client, resources, queue, "WRITE the plan", tenant_a)
        _, other_tenant = await _run(client, resources, queue, "READ the plan", tenant_b)
        _, same_tenant_other_task = await _run(client, resources, queue, "READ it", tenant_a)

    assert not _read_ok(other_tenant)
    assert not _read_ok(same_tenant_other_task)  # default scope: one root per session
    written = workspace / tenant_a / writer / "notes/plan.md"
    assert written.read_text() == SECRET
    assert (workspace / tenant_a / writer).stat().st_mode & 0o777 == 0o700
    assert sorted(os.listdir(workspace)) == sorted([tenant_a, tenant_b])


async def test_tenant_scope_shares_one_root_per_tenant(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path
) -> None:
    tenant_a, tenant_b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    async with agent_worker(_write_then_read(), workspace, workspace_scope="tenant") as queue:
        await _run(client, resources, queue, "WRITE the plan", tenant_a)
        _, same_tenant = await _run(client, resources, queue, "READ the plan", tenant_a)
        _, other_tenant = await _run(client, resources, queue, "READ the plan", tenant_b)

    assert _read_ok(same_tenant)
    assert not _read_ok(other_tenant)
    assert (workspace / tenant_a / TENANT_DIR / "notes/plan.md").read_text() == SECRET


async def test_project_scope_shares_one_root_per_project_of_a_tenant(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path
) -> None:
    tenant, other = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    async with agent_worker(_write_then_read(), workspace, workspace_scope="project") as queue:
        await _run(client, resources, queue, "WRITE the plan", tenant, "apollo")
        _, same_project = await _run(client, resources, queue, "READ the plan", tenant, "apollo")
        _, other_project = await _run(client, resources, queue, "READ the plan", tenant, "gemini")
        _, no_project = await _run(client, resources, queue, "READ the plan", tenant)
        _, other_tenant = await _run(client, resources, queue, "READ the plan", other, "apollo")

    assert _read_ok(same_project)
    assert not _read_ok(other_project)
    assert not _read_ok(no_project)  # a task naming no project gets a root of its own
    assert not _read_ok(other_tenant)
    assert (workspace / tenant / PROJECTS_DIR / "apollo/notes/plan.md").read_text() == SECRET


@pytest.mark.parametrize("bad", ["", "../etc", "A", "x" * 65, "a/b", ".hidden", "a..b"])
async def test_a_bad_project_name_is_refused_before_anything_is_committed(
    client: Client, resources: Resources, bad: str, tenant: str
) -> None:
    session_id = uuid.uuid4()
    opts = tasks.TaskOptions(tenant_id=tenant, task_queue="unused", project=bad)
    with pytest.raises(ValueError, match="invalid project name"):
        await tasks.start_task(client, resources.sessions, "x", opts, session_id=session_id)
    async with resources.sessions() as db:
        assert await SessionRepository(db, tenant).find(session_id) is None
