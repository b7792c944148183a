"""`running_tasks` counts every way a task starts running, not only a start: a sub-agent is
refused past it (the model reads why), an approval that would take a parked task back among
the running is refused (429, nothing recorded), and so is a resume; a frozen tenant's resume
is refused like its starts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import func, select
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.storage.quotas import QuotaRefused, TenantControls, TenantFrozen
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.helpers import session_root, start, wait_for_pending
from tests.support.runaway import SlowRunaway
from tests.test_admission_gate import FanOut
from tests.test_quotas import _until

WRITE = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.md", "content": "A"}}]},
    {"text": "written"},
]


async def _running_quota(res: Resources, tenant: str, n: int) -> None:
    async with res.sessions() as db, db.begin():
        await TenantControls(db, tenant).set_quotas({"running_tasks": n}, "ops")


async def _count(res: Resources, *where: object) -> int:
    async with res.sessions() as db:
        n = await db.scalar(select(func.count()).where(*where))
    return int(n or 0)


async def test_a_sub_agent_past_the_running_tasks_quota_is_refused_with_a_result_the_model_reads(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    await _running_quota(resources, tenant, 1)
    model = FanOut("delegate", 1)
    async with agent_worker(model, workspace) as queue:
        _, handle = await start(client, resources, queue, tenant=tenant)
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == SessionStatus.COMPLETED
    assert model.child_replies == 0
    assert await _count(resources, SessionRow.tenant_id == tenant) == 1  # no child session
    async with resources.sessions() as db:
        refusal = await db.scalar(
            select(ItemRow).where(ItemRow.tenant_id == tenant, ItemRow.kind == ItemKind.TOOL_RESULT)
        )
    assert refusal is not None and refusal.data.get("error_type") == "QuotaExceeded"
    assert "quota running_tasks reached: 1 of 1" in refusal.text


async def test_approving_a_parked_task_at_the_running_quota_is_refused_and_records_nothing(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    await _running_quota(resources, tenant, 1)
    runaway = SlowRunaway(delay=1.0)  # a short history: replayed whole at every task
    async with (
        agent_worker(ScriptedProvider.from_data(WRITE), workspace) as parked_queue,
        agent_worker(runaway, workspace) as busy_queue,
    ):
        parked, parked_handle = await start(client, resources, parked_queue, tenant=tenant)
        (call,) = await wait_for_pending(client, parked)
        busy, _ = await start(client, resources, busy_queue, tenant=tenant)
        session_root(workspace, tenant, busy).joinpath("a.txt").write_text("alpha")
        await _until(resources, tenant, busy, SessionStatus.RUNNING)

        with pytest.raises(QuotaRefused, match=r"running_tasks reached for tenant .*: 1 of 1"):
            await verbs.approve(
                client, parked, call, "ann", sessions=resources.sessions, tenant_id=tenant
            )
        approvals = (ItemRow.tenant_id == tenant, ItemRow.kind == ItemKind.APPROVAL)
        assert await _count(resources, *approvals) == 0
        assert await wait_for_pending(client, parked) == [call]

        # Once the other task ends, the approval goes through.
        await verbs.cancel(client, resources.sessions, tenant, busy)
        await _until(resources, tenant, busy, SessionStatus.CANCELLED)
        await verbs.approve(
            client, parked, call, "ann", sessions=resources.sessions, tenant_id=tenant
        )
        result = await asyncio.wait_for(parked_handle.result(), 60)
    assert result.status == SessionStatus.COMPLETED


async def test_a_resume_is_admitted_like_a_start_frozen_and_at_the_running_quota(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    service, ops = verbs.service(client, resources.sessions), verbs.operator(tenant)
    runaway = SlowRunaway(delay=1.0)  # a short history: replayed whole at every task
    async with agent_worker(runaway, workspace) as queue:
        stopped, _ = await start(client, resources, queue, tenant=tenant)
        session_root(workspace, tenant, stopped).joinpath("a.txt").write_text("alpha")
        await _until(resources, tenant, stopped, SessionStatus.RUNNING)
        await verbs.cancel(client, resources.sessions, tenant, stopped)
        await _until(resources, tenant, stopped, SessionStatus.CANCELLED)

        await service.freeze(ops)
        with pytest.raises(TenantFrozen):
            await verbs.resume(client, resources.sessions, tenant, stopped)
        await service.thaw(ops)

        await _running_quota(resources, tenant, 1)
        busy, _ = await start(client, resources, queue, tenant=tenant)
        session_root(workspace, tenant, busy).joinpath("a.txt").write_text("alpha")
        await _until(resources, tenant, busy, SessionStatus.RUNNING)
        with pytest.raises(QuotaRefused, match="running_tasks reached"):
            await verbs.resume(client, resources.sessions, tenant, stopped)
        await _until(resources, tenant, stopped, SessionStatus.CANCELLED)  # as it was

        await verbs.cancel(client, resources.sessions, tenant, busy)
        await _until(resources, tenant, busy, SessionStatus.CANCELLED)
        resumed = await verbs.resume(client, resources.sessions, tenant, stopped)
        await _until(resources, tenant, stopped, SessionStatus.RUNNING)
        await resumed.cancel()
