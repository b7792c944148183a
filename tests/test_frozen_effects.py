"""A frozen tenant runs no effect: a decision on a waiting call is recorded and held until
the thaw (the call passes the gate only then), for a tool call and for a sub-agent alike."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import func, select
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support import verbs
from tests.support.helpers import session_root, start, wait_for_pending
from tests.test_admission_gate import FanOut
from tests.test_quotas import _until

WRITE = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.md", "content": "A"}}]},
    {"text": "written"},
]


async def _count(res: Resources, tenant: str, *where: object) -> int:
    async with res.sessions() as db:
        n = await db.scalar(select(func.count()).where(*where))
    return int(n or 0)


async def test_an_approval_while_frozen_is_recorded_and_the_write_waits_for_the_thaw(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    service, ops = verbs.service(client, resources.sessions), verbs.operator(tenant)
    async with agent_worker(ScriptedProvider.from_data(WRITE), workspace) as queue:
        sid, handle = await start(client, resources, queue, tenant=tenant)
        (call,) = await wait_for_pending(client, sid)
        await service.freeze(ops)
        decided = await verbs.approve(
            client, sid, call, "ann", sessions=resources.sessions, tenant_id=tenant
        )
        assert decided.approved
        await _until(resources, tenant, sid, SessionStatus.FROZEN)
        await asyncio.sleep(1)
        target = session_root(workspace, tenant, sid) / "a.md"
        assert not target.exists()
        results = (ItemRow.tenant_id == tenant, ItemRow.kind == ItemKind.TOOL_RESULT)
        assert await _count(resources, tenant, *results) == 0
        approvals = (ItemRow.tenant_id == tenant, ItemRow.kind == ItemKind.APPROVAL)
        assert await _count(resources, tenant, *approvals) == 1  # the decision stands

        await service.thaw(ops)
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == SessionStatus.COMPLETED
    assert target.read_text() == "A"


async def test_a_delegate_approved_while_frozen_starts_its_child_only_after_the_thaw(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    service, ops = verbs.service(client, resources.sessions), verbs.operator(tenant)
    async with agent_worker(FanOut("delegate", 1), workspace) as queue:
        sid, handle = await start(
            client, resources, queue, tenant=tenant, approval_policies={"delegate": "always"}
        )
        (call,) = await wait_for_pending(client, sid)
        await service.freeze(ops)
        await verbs.approve(client, sid, call, "ann", sessions=resources.sessions, tenant_id=tenant)
        await _until(resources, tenant, sid, SessionStatus.FROZEN)
        await asyncio.sleep(1)
        children = (SessionRow.tenant_id == tenant, SessionRow.parent_id.is_not(None))
        assert await _count(resources, tenant, *children) == 0

        await service.thaw(ops)
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == SessionStatus.COMPLETED
    assert await _count(resources, tenant, *children) == 1
