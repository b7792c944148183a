"""A task's budget, checked before each model call against what the session committed.

Reads only (one round trip, storage.usage.SessionSpend): a step that finds the budget
reached calls nothing and commits nothing, so once the budget is raised the loop takes the
very same step under the same idempotency key.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from storage.models import SessionRow
from storage.usage import UsageRepository
from workflows.contracts import BudgetFigures, TaskBudget


async def budget_reached(
    db: AsyncSession, tenant_id: str, session: SessionRow, budget: TaskBudget
) -> BudgetFigures | None:
    """The session's figures when any is at or past its limit, else None."""
    spend = await UsageRepository(db, tenant_id).session_spend(session.id)
    seconds = (datetime.now(UTC) - session.created_at).total_seconds()
    cost = None if spend.cost_usd is None else float(spend.cost_usd)
    reached = []
    if budget.tokens is not None and spend.tokens >= budget.tokens:
        reached.append("tokens")
    # Unpriced replies leave the cost unknown: a cost budget cannot be kept, so it stops.
    if budget.cost_usd is not None and (cost is None or cost >= budget.cost_usd):
        reached.append("cost_usd")
    if budget.tool_calls is not None and spend.tool_calls >= budget.tool_calls:
        reached.append("tool_calls")
    if budget.seconds is not None and seconds >= budget.seconds:
        reached.append("seconds")
    if not reached:
        return None
    return BudgetFigures(
        reached=reached,
        tokens=spend.tokens,
        tool_calls=spend.tool_calls,
        seconds=round(seconds, 3),
        cost_usd=cost,
    )
