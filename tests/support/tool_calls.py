"""Drive run_tool directly on the real database: a committed tool call, a dead attempt's
ledger claim, what the call settled as, and the call's items as readers see them."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.tool_run import ToolActivities
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.items import SET_ASIDE_PREFIX, NewItem
from durable_agents.storage.models import ItemRow
from durable_agents.workers.resources import Resources
from durable_agents.workflows.contracts import ToolOutcome, ToolRunInput


async def new_call(
    res: Resources,
    tenant: str,
    name: str,
    arguments: dict[str, Any] | None = None,
    approvals: dict[str, Any] | None = None,
) -> ToolRunInput:
    """A session with one tool call the model asked for, as call_model commits it;
    `approvals`: the session's (task policies, loosenings), as a start commits them."""
    sid = uuid.uuid4()
    async with agent_state(res.sessions, tenant, write=True) as st:
        await st.sessions.create(sid, title="t", model_config={}, approvals=approvals)
        await st.items.append(
            NewItem(
                session_id=sid,
                kind="tool_call",
                role="assistant",
                idempotency_key=f"{sid}:call",
                tool_call_id="call_0_0",
                tool_name=name,
                data={"arguments": arguments or {}, "step": 0},
            )
        )
    return ToolRunInput(str(sid), tenant, 0, "call_0_0", name, f"wf-{sid}:0:call_0_0")


async def approved(res: Resources, inp: ToolRunInput) -> None:
    """A person's approval of the call, as record_approval commits it."""
    async with agent_state(res.sessions, inp.tenant_id, write=True) as st:
        await st.items.append(
            NewItem(
                session_id=uuid.UUID(inp.session_id),
                kind="approval",
                role="user",
                idempotency_key=f"{inp.idempotency_key}:decision",
                tool_call_id=inp.tool_call_id,
                data={"approved": True, "decided_by": "test", "step": inp.step},
            )
        )


async def claim(res: Resources, inp: ToolRunInput) -> None:
    """What an attempt that died between its claim and its commit leaves behind."""
    async with agent_state(res.sessions, inp.tenant_id, write=True) as st:
        await st.effects.claim(
            inp.idempotency_key,
            session_id=uuid.UUID(inp.session_id),
            tool_call_id=inp.tool_call_id,
            tool_name=inp.name,
        )


async def ledger_state(res: Resources, inp: ToolRunInput) -> tuple[str, int] | None:
    async with agent_state(res.sessions, inp.tenant_id) as st:
        row = await st.effects.get(inp.idempotency_key)
    return None if row is None else (row.state, row.attempt)


async def result_of(res: Resources, inp: ToolRunInput) -> dict[str, Any]:
    async with agent_state(res.sessions, inp.tenant_id) as st:
        rows = await st.items.for_tool_call(uuid.UUID(inp.session_id), inp.tool_call_id)
    (result,) = [r for r in rows if r.kind == "tool_result"]
    return {"text": result.text, **result.data}


async def run(acts: ToolActivities, inp: ToolRunInput) -> ToolOutcome:
    outcome: ToolOutcome = await ActivityEnvironment().run(acts.run_tool, inp)
    return outcome


async def call_items(res: Resources, tenant: str, session_id: str, call_id: str) -> list[ItemRow]:
    """The call's items as every reader sees them (none set aside), in order."""
    async with agent_state(res.sessions, tenant) as st:
        return await st.items.for_tool_call(uuid.UUID(session_id), call_id)


async def set_aside_rows(res: Resources, tenant: str, session_id: str) -> list[ItemRow]:
    """The session's rows no reader sees (storage/items.py's set_aside), from the table."""
    async with res.sessions() as db:
        rows = await db.scalars(
            select(ItemRow).where(
                ItemRow.tenant_id == tenant,
                ItemRow.session_id == uuid.UUID(session_id),
                ItemRow.idempotency_key.like(f"{SET_ASIDE_PREFIX}%"),
            )
        )
        return sorted(rows, key=lambda row: row.ordinal)
