"""What a model step is checked against before the provider is called: the task's budget
against what the session (or its root task) committed, its tenant's quotas against what
the tenant committed today and this month, and the tenant's kill switch.

Reads only, in one round trip (storage.quotas.TenantControls.step_figures): a step that
finds a limit reached calls nothing and commits nothing, so once the budget or quota is
raised (or the tenant thawed) the loop takes the very same step under the same key.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, time

from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.models import SessionRow
from durable_agents.storage.quotas import (
    Quotas,
    StepFigures,
    next_period,
    spend_over,
)
from durable_agents.workflows.contracts import BudgetFigures, QuotaReached, TaskBudget


@dataclass(frozen=True)
class StepGate:
    """Why a step may not run (at most one is set), or all None/False: it may."""

    frozen: bool = False
    budget: BudgetFigures | None = None
    quota: QuotaReached | None = None

    @property
    def closed(self) -> bool:
        return self.frozen or self.budget is not None or self.quota is not None


OPEN = StepGate()


async def step_gate(
    st: AgentState,
    session: SessionRow,
    budget: TaskBudget | None,
    *,
    budget_session: uuid.UUID | None = None,
    quota_defaults: Quotas | None = None,
    now: datetime | None = None,
) -> StepGate:
    """Frozen first (nothing of the tenant runs), then the task's budget, then the
    tenant's quotas: the table's figures, each unset one from `quota_defaults`."""
    now = now or datetime.now(UTC)
    figures = await st.controls.step_figures(
        session.id, budget_session=budget_session, day=now.date()
    )
    if figures.frozen:
        return StepGate(frozen=True)
    if budget is not None:
        reached = _budget(figures, session, budget, now)
        if reached is not None:
            return StepGate(budget=reached)
    quotas = figures.quotas.over(quota_defaults)
    if quotas.spend_limited():
        for period, spent in (("day", figures.day), ("month", figures.month)):
            words = spend_over(quotas, period, spent)
            if words is not None:
                resets = datetime.combine(next_period(now.date(), period == "month"), time(), UTC)
                wait = (resets - now).total_seconds()
                return StepGate(quota=QuotaReached(words, resets_in_seconds=round(wait, 3)))
    return OPEN


async def budget_reached(
    st: AgentState, session: SessionRow, budget: TaskBudget
) -> BudgetFigures | None:
    """The session's figures when any is at or past its limit, else None."""
    now = datetime.now(UTC)
    figures = await st.controls.step_figures(session.id, day=now.date())
    return _budget(figures, session, budget, now)


def _budget(
    figures: StepFigures, session: SessionRow, budget: TaskBudget, now: datetime
) -> BudgetFigures | None:
    seconds = (now - session.created_at).total_seconds()
    cost = None if figures.session_cost_usd is None else float(figures.session_cost_usd)
    reached = []
    if budget.tokens is not None and figures.session_tokens >= budget.tokens:
        reached.append("tokens")
    # Unpriced replies leave the cost unknown: a cost budget cannot be kept, so it stops.
    if budget.cost_usd is not None and (cost is None or cost >= budget.cost_usd):
        reached.append("cost_usd")
    if budget.tool_calls is not None and figures.session_tool_calls >= budget.tool_calls:
        reached.append("tool_calls")
    if budget.seconds is not None and seconds >= budget.seconds:
        reached.append("seconds")
    if not reached:
        return None
    return BudgetFigures(
        reached=reached,
        tokens=figures.session_tokens,
        tool_calls=figures.session_tool_calls,
        seconds=round(seconds, 3),
        cost_usd=cost,
    )
