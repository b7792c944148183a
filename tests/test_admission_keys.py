"""An admission is decided once per idempotency key (activities/policies/admission.py): asked
again under the same key (an activity's retry, a replay) it stands, whatever the budget says
by then, and counts nothing twice; a model call's reservation then holds again. Another key
meets the budget the first one spent."""

from __future__ import annotations

import uuid
from decimal import Decimal

from sqlalchemy import select

from durable_agents.activities.policies.admission import Admission, Gate, GateLimits, admit
from durable_agents.storage.admissions import MODEL, TOOL, Reservation
from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.quotas import Quotas
from durable_agents.storage.sessions import SessionRepository
from durable_agents.storage.usage_models import AdmissionRow
from durable_agents.workers.resources import Resources
from durable_agents.workflows.gate_contracts import TaskBudget

ONE_CALL = TaskBudget(tool_calls=1)
# One model call's reservation (RESERVED tokens) takes all of it while in flight.
RESERVED = 100
ONE_REPLY = TaskBudget(tokens=RESERVED)
LIMITS = GateLimits(Quotas())


async def _admit(res: Resources, tenant: str, sid: uuid.UUID, kind: str, key: str) -> Gate:
    async with res.sessions() as db, db.begin():
        session = await SessionRepository(db, tenant).get(sid)
        if kind == MODEL:
            held, budget = Reservation(RESERVED, Decimal("0.01")), ONE_REPLY
        else:
            held, budget = None, ONE_CALL
        request = Admission(kind, key, session, budget, reservation=held)
        return await admit(AgentState(db, tenant), request, LIMITS)


async def test_a_key_admitted_once_stands_when_asked_again_and_counts_once(
    resources: Resources, tenant: str
) -> None:
    sid, other_sid = uuid.uuid4(), uuid.uuid4()
    async with resources.sessions() as db, db.begin():
        for each in (sid, other_sid):
            await SessionRepository(db, tenant).create(each, title="t", model_config={})

    assert (await _admit(resources, tenant, sid, TOOL, "tool-1")).admitted
    # The budget of one tool call is spent by tool-1 itself: its retry is still admitted,
    # another call is not.
    assert (await _admit(resources, tenant, sid, TOOL, "tool-1")).admitted
    other = await _admit(resources, tenant, sid, TOOL, "tool-2")
    assert other.closed is not None and other.closed.budget is not None
    assert other.closed.budget.reached == ["tool_calls"]
    assert other.closed.budget.tool_calls == 1  # counted once, not per ask

    # A model call's reservation takes the whole token budget while it is in flight; once
    # settled (its attempt failed), its retry is admitted and reserves again.
    assert (await _admit(resources, tenant, other_sid, MODEL, "model-1")).admitted
    assert not (await _admit(resources, tenant, other_sid, MODEL, "model-2")).admitted
    async with resources.sessions() as db, db.begin():
        await AgentState(db, tenant).admissions.settle("model-1")
    assert (await _admit(resources, tenant, other_sid, MODEL, "model-1")).admitted
    async with resources.sessions() as db:
        rows = (
            await db.scalars(select(AdmissionRow).where(AdmissionRow.tenant_id == tenant))
        ).all()
    by_key = {row.idempotency_key: row for row in rows}
    assert sorted(by_key) == ["model-1", "tool-1"]  # refused asks wrote nothing
    assert by_key["model-1"].open  # the retried call holds its reservation again
