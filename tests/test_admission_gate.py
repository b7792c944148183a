"""One gate for every admission in the loop (activities/policies/admission.py): a reply may
hold any number of calls, and each call, each sub-agent and each model call passes the
budget on its own. The two hostile replies of docs/SECURITY.md's overshoot bound: 12
list_dir calls under budget_tool_calls=1, and 30 delegate calls under budget_tokens=100
whose children would spend 1,000 tokens each."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest
from sqlalchemy import func, select
from temporalio.client import Client

from durable_agents.activities.providers.base import ModelReply, ModelRequest, ProviderCall, Usage
from durable_agents.activities.reply_items import CALL_LIMIT_ERROR
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.storage.usage import UsageRepository
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.client.tasks import live_status
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support.gateway import poll
from tests.support.helpers import session_root, start
from tests.support.verbs import raise_budget
from tests.test_quotas import _until

HISTORIES = Path(__file__).parent / "histories"
CONTEXT_TOKENS = 4_000  # the reservation of one model call: its context budget
CHILD_REPLY = Usage(900, 100)  # 1,000 tokens a child's reply


class FanOut:
    """The root task's first reply asks for `calls` calls of `tool` at once, then it answers;
    a sub-agent (its task starts "SUB:") answers at once, spending 1,000 tokens."""

    name = "fan-out"

    def __init__(self, tool: str, calls: int) -> None:
        self.tool, self.calls = tool, calls
        self.root_replies = 0
        self.child_replies = 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        if any("SUB:" in (m.content or "") for m in request.messages if m.role == "user"):
            self.child_replies += 1
            return ModelReply(text="sub-agent done", usage=CHILD_REPLY)
        self.root_replies += 1
        if self.root_replies > 1:
            return ModelReply(text="all done", usage=Usage(5, 5))
        args = {"task": "SUB: look around"} if self.tool == "delegate" else {"path": "."}
        calls = [ProviderCall(f"p{n}", self.tool, dict(args)) for n in range(self.calls)]
        return ModelReply(text="", tool_calls=calls, usage=Usage(5, 5))

    async def aclose(self) -> None:
        return None


async def _results(res: Resources, tenant: str, sid: uuid.UUID) -> dict[str, int]:
    """The session's tool results by error type ("" for a tool's own output)."""
    async with res.sessions() as db:
        rows = await db.scalars(
            select(ItemRow).where(
                ItemRow.tenant_id == tenant,
                ItemRow.session_id == sid,
                ItemRow.kind == ItemKind.TOOL_RESULT,
            )
        )
        found: dict[str, int] = {}
        for row in rows:
            kind = str(row.data.get("error_type") or "")
            found[kind] = found.get(kind, 0) + 1
        return found


async def test_twelve_calls_in_one_reply_run_one_under_a_budget_of_one_tool_call(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    model = FanOut("list_dir", 12)
    sid = uuid.uuid4()
    session_root(workspace, tenant, sid)
    async with agent_worker(model, workspace) as queue:
        _, handle = await start(
            client, resources, queue, tenant=tenant, session_id=sid, budget_tool_calls=1
        )
        await _until(resources, tenant, str(sid), SessionStatus.BUDGET_EXHAUSTED)
        await asyncio.sleep(1)  # every call has passed the gate by now
        assert await _results(resources, tenant, sid) == {"": 1}
        live = await live_status(client, str(sid))
        assert live.last_error == "budget reached: tool_calls 1 of 1"
        async with resources.sessions() as db:
            spend = await UsageRepository(db, tenant).session_spend(sid)
        assert spend.tool_calls == 1

        # Raised to 4: three more run, the other eight stay parked at the gate.
        await raise_budget(
            client, str(sid), "ann", sessions=resources.sessions, tenant_id=tenant, tool_calls=4
        )

        async def ran() -> dict[str, int]:
            return await _results(resources, tenant, sid)

        await poll(ran, lambda r: r == {"": 4}, within_seconds=30)
        await _until(resources, tenant, str(sid), SessionStatus.BUDGET_EXHAUSTED)
        await raise_budget(
            client, str(sid), "ann", sessions=resources.sessions, tenant_id=tenant, tool_calls=50
        )
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == SessionStatus.COMPLETED
    assert await _results(resources, tenant, sid) == {"": 12}
    assert model.root_replies == 2
    if os.environ.get("RECORD_HISTORIES"):  # replayed by tests/test_replay.py
        HISTORIES.joinpath("tool_calls_at_the_gate.json").write_text(
            (await handle.fetch_history()).to_json()
        )


# Its two polls (120 s and 240 s) and 15 s of spend checks, past the suite's 300 s default.
@pytest.mark.timeout(420)
async def test_thirty_delegates_under_a_budget_of_100_tokens_spend_less_than_one_reservation_more(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    model = FanOut("delegate", 30)
    sid = uuid.uuid4()
    session_root(workspace, tenant, sid)
    async with agent_worker(
        model,
        workspace,
        context_tokens=CONTEXT_TOKENS,
        reply_tokens=500,
        agent_settings={"max_calls_per_reply": 16, "max_sub_agents": 8},
    ) as queue:
        await start(client, resources, queue, tenant=tenant, session_id=sid, budget_tokens=100)

        async def children() -> dict[str, int]:
            async with resources.sessions() as db:
                rows = await db.execute(
                    select(SessionRow.status, func.count())
                    .where(SessionRow.tenant_id == tenant, SessionRow.parent_id == sid)
                    .group_by(SessionRow.status)
                )
            return {str(status): int(n) for status, n in rows.all()}

        # Past the reply's cap: 14 calls not run. The other 16 meet the gate at once: 8 start
        # a child; of the rest, those the gate takes before the first child's model call has
        # reserved its tokens are refused at the task's cap, the later ones park at the
        # budget (the worker's activities race: 3 to 8 refused, seen on a busy machine).
        async def refusals() -> dict[str, int]:
            return await _results(resources, tenant, sid)

        # Sixteen calls, eight children and their admissions: ~20 s on a quiet machine, over
        # 60 s beside the rest of the suite on 2 cores.
        await poll(refusals, lambda r: r.get(CALL_LIMIT_ERROR) == 14, within_seconds=120)
        # The first child admitted to a model call answered; every other one parks at the
        # root's budget (the parent waits for them, running). Eight children, each started,
        # admitted and parked in turn: ~30 s alone, past 120 s beside the rest of the suite
        # on 2 cores.
        parked = {SessionStatus.COMPLETED: 1, SessionStatus.BUDGET_EXHAUSTED: 7}
        await poll(children, lambda c: c == parked, within_seconds=240)
        assert (await refusals()).get("SubAgentLimit", 0) <= 8
        # Every child's first model call met the root's budget: the first one admitted
        # reserved 4,000 tokens, which held the others back, then spent 1,000 of them.
        for _ in range(3):
            await asyncio.sleep(5)
            async with resources.sessions() as db:
                spend = await UsageRepository(db, tenant).session_spend(sid)
            assert spend.tokens < 100 + CONTEXT_TOKENS, spend
        assert model.child_replies == 1
        assert spend.tokens == 10 + 1_000
