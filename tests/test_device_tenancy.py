"""A device's identity is (tenant, device id): two tenants' devices of one name never share
calls, and a task may name only a device its own tenant registered."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from sqlalchemy import func, select
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tool_run import ToolActivities
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.workers.client import tasks
from durable_agents.workers.process.cloud import running
from durable_agents.workers.process.device_worker import build_device_worker
from durable_agents.workers.resources import Resources
from durable_agents.workflows.policies import device_task_queue
from tests.conftest import AgentRunner
from tests.support.helpers import items_of, register_device, start


def _device_tools(res: Resources, root: Path) -> ToolActivities:
    return ToolActivities(res.sessions, res.store, default_registry(), workspace=root)


async def test_same_device_name_in_two_tenants_runs_each_tenants_calls_on_its_own_machine(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    other = f"{tenant}-b"
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    for root, text in ((mine, "tenant A's notes"), (theirs, "tenant B's secret")):
        root.mkdir()
        (root / "notes.txt").write_text(text)
    await register_device(resources, tenant, "laptop", ["read_file"])
    await register_device(resources, other, "laptop", ["read_file"])
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}]
    )
    # Tenant B's "laptop" is serving first and alone: under the old queue name
    # (device-laptop) it would take tenant A's call.
    async with (
        running(build_device_worker(client, other, "laptop", _device_tools(resources, theirs))),
        agent_worker(provider, workspace) as queue,
    ):
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, device_id="laptop", device_tools=["read_file"]
        )
        await asyncio.sleep(1.0)
        # No result yet (the model took its next step meanwhile: it is told the call is pending).
        items = await items_of(resources, tenant, session_id)
        assert "tool_call" in [i.kind for i in items]
        assert "tool_result" not in [i.kind for i in items]
        async with running(
            build_device_worker(client, tenant, "laptop", _device_tools(resources, mine))
        ):
            result = await asyncio.wait_for(handle.result(), 30)

    assert result.status == "completed"
    told = [m.content for m in provider.requests[-1].messages if m.role == "tool"]
    assert told == ["tenant A's notes"]


def test_device_queue_names_cannot_collide_across_tenants() -> None:
    assert device_task_queue("a", "laptop") != device_task_queue("b", "laptop")
    # Ids may hold '-' and '.', never ':': no split of one name reads as another's.
    assert device_task_queue("a-b", "c") != device_task_queue("a", "b-c")
    assert device_task_queue("a.b", "c") != device_task_queue("a", "b.c")


async def _counts(res: Resources, tenant: str) -> tuple[int, int]:
    async with res.sessions() as db:
        sessions = await db.scalar(
            select(func.count()).select_from(SessionRow).where(SessionRow.tenant_id == tenant)
        )
        items = await db.scalar(
            select(func.count()).select_from(ItemRow).where(ItemRow.tenant_id == tenant)
        )
    return int(sessions or 0), int(items or 0)


@pytest.mark.parametrize(
    ("device", "tools", "refusal"),
    [
        ("phone", ["read_file"], r"no device 'phone' is registered for tenant"),
        ("bad id!", ["read_file"], r"device_id must be"),
        ("laptop", ["write_file"], r"does not serve 'write_file'"),
        (None, ["read_file"], r"need a device_id"),
    ],
)
async def test_start_naming_a_device_the_tenant_cannot_use_is_refused_before_any_commit(
    client: Client,
    resources: Resources,
    tenant: str,
    device: str | None,
    tools: list[str],
    refusal: str,
) -> None:
    await register_device(resources, tenant, "laptop", ["read_file"])
    # Another tenant's device of that name does not count for this one.
    await register_device(resources, f"{tenant}-b", "phone", ["read_file"])
    session_id = uuid.uuid4()
    with pytest.raises(ValueError, match=refusal):
        opts = tasks.TaskOptions(
            tenant_id=tenant, task_queue="unused", device_id=device, device_tools=tools
        )
        await tasks.start_task(client, resources.sessions, "read it", opts, session_id=session_id)
    assert await _counts(resources, tenant) == (0, 0)
    with pytest.raises(Exception, match="not found"):
        await tasks.task_handle(client, str(session_id)).describe()
