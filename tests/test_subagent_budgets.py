"""Sub-agents spend their root task's budget and their tenant's quotas: every reply of a
delegated child counts in the root session's spend (what its budget and the child's are
checked against) and in the tenant's day."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select
from temporalio.client import Client

from durable_agents.activities.providers.base import ModelReply, ModelRequest, ProviderCall, Usage
from durable_agents.storage.models import SessionRow
from durable_agents.storage.quotas import TenantControls
from durable_agents.storage.usage import UsageFilter, UsageRepository
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support.helpers import session_root, start
from tests.support.runaway import PER_REPLY, REPLY_TOKENS
from tests.support.verbs import raise_budget
from tests.test_quotas import _until


class Delegator:
    """The root task delegates once, then answers; its sub-agent reads a file every step
    until `answering`."""

    name = "delegator"

    def __init__(self) -> None:
        self.parent_calls = 0
        self.child_calls = 0
        self.answering = False

    async def complete(self, request: ModelRequest) -> ModelReply:
        usage = Usage(*PER_REPLY)
        if any("SUB:" in (m.content or "") for m in request.messages if m.role == "user"):
            self.child_calls += 1
            if self.answering:
                return ModelReply(text="read it", usage=usage)
            call = ProviderCall(f"r{self.child_calls}", "read_file", {"path": "a.txt"})
            return ModelReply(text="", tool_calls=[call], usage=usage)
        self.parent_calls += 1
        if self.parent_calls == 1:
            call = ProviderCall("d1", "delegate", {"task": "SUB: read a.txt", "agent": "reader"})
            return ModelReply(text="", tool_calls=[call], usage=usage)
        return ModelReply(text="done", usage=usage)

    async def aclose(self) -> None:
        return None


async def test_a_sub_agent_spends_its_parents_budget_and_its_tenants_quota(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    model = Delegator()
    sid = uuid.uuid4()
    (session_root(workspace, tenant, sid) / "a.txt").write_text("alpha")
    async with agent_worker(model, workspace) as queue:
        # 500 tokens for the whole tree: the parent's first reply (110) and four of the
        # child's (440) reach it; on its own budget the child would have taken five.
        _, handle = await start(
            client, resources, queue, tenant=tenant, session_id=sid, budget_tokens=500
        )
        async with resources.sessions() as db:

            async def child_id() -> str | None:
                found = await db.scalar(select(SessionRow.id).where(SessionRow.parent_id == sid))
                return None if found is None else str(found)

            for _ in range(300):
                child = await child_id()
                if child is not None:
                    break
                await asyncio.sleep(0.1)
        assert child is not None
        await _until(resources, tenant, child, SessionStatus.BUDGET_EXHAUSTED)
        assert (model.parent_calls, model.child_calls) == (1, 4)
        async with resources.sessions() as db:
            usage = UsageRepository(db, tenant)
            root, own = await usage.session_spend(sid), await usage.session_spend(uuid.UUID(child))
            day = await TenantControls(db, tenant).spent(
                datetime.now(UTC).date(), datetime.now(UTC).date()
            )
            billed = await usage.total(UsageFilter(day=datetime.now(UTC).date()))
        assert (root.tokens, own.tokens) == (5 * REPLY_TOKENS, 4 * REPLY_TOKENS)
        assert day.tokens == billed.tokens == 5 * REPLY_TOKENS  # the tenant's quota counts it

        # Raised on the root task, the raise reaches its parked sub-agent too: the tree
        # goes on to the end with the new figures.
        model.answering = True
        raised = await raise_budget(
            client, str(sid), "ann", sessions=resources.sessions, tenant_id=tenant, tokens=5_000
        )
        assert raised.resumed
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == SessionStatus.COMPLETED
    assert (model.parent_calls, model.child_calls) == (2, 5)
