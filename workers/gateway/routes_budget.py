"""POST /v1/sessions/{id}/budget: raise a task's budget (approve scope); a task parked at
its budget goes on from the step it stopped before."""

from __future__ import annotations

import uuid

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from durable_agents.workers.client.commands import Caller
from durable_agents.workers.client.http_bodies import Number, WholeNumber
from durable_agents.workers.gateway.auth import Approver
from durable_agents.workers.gateway.context import GatewayDep

router = APIRouter(prefix="/v1/sessions", tags=["tasks"])


class RaiseBudget(BaseModel):
    """New figures (unnamed ones stay); ranges are the command layer's
    (activities/policies/task_rules.py), as at every door."""

    model_config = ConfigDict(extra="forbid")

    tokens: WholeNumber = None
    cost_usd: Number = None
    tool_calls: WholeNumber = None
    seconds: Number = None


class BudgetRaised(BaseModel):
    session_id: uuid.UUID
    resumed: bool
    decided_by: str
    tokens: int | None
    cost_usd: float | None
    tool_calls: int | None
    seconds: float | None
    # What still holds the task after the raise (another figure, a freeze, a quota).
    held_by: str | None = None


@router.post("/{session_id}/budget", response_model=BudgetRaised)
async def raise_task_budget(
    session_id: str, body: RaiseBudget, principal: Approver, gateway: GatewayDep
) -> BudgetRaised:
    """Raise the budget of a task of the key's tenant; who raised it is the key's user."""
    figures = body.model_dump(exclude_unset=True)
    result = await gateway.service.raise_budget(Caller.of_key(principal), session_id, figures)
    return BudgetRaised(
        session_id=uuid.UUID(result.session_id),
        resumed=result.resumed,
        decided_by=principal.user_id,
        tokens=result.tokens,
        cost_usd=result.cost_usd,
        tool_calls=result.tool_calls,
        seconds=result.seconds,
        held_by=result.held_by,
    )
