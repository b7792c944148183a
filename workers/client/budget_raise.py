"""Raise a task's budget: a person with the approve scope gives new figures, and a task
parked at its budget (budget_exhausted) goes on from the step it stopped before; so does
a sub-agent of it (they share the root task's budget)."""

from __future__ import annotations

import uuid
from dataclasses import asdict

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.service import RPCError

from durable_agents.activities.policies.task_rules import check_budget_raise
from durable_agents.activities.policies.text_limits import check_text
from durable_agents.storage.items import ItemRepository, NewItem
from durable_agents.storage.models import SessionRow
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import TERMINAL_STATUSES, SessionStatus
from durable_agents.workers.client.tasks import MAX_DECIDER_CHARS, session_uuid, task_handle
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import RaiseBudgetInput, RaiseBudgetResult
from durable_agents.workflows.policies import workflow_id_for


async def raise_budget(
    client: Client,
    session_id: str,
    by: str,
    *,
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    tokens: int | None = None,
    cost_usd: float | None = None,
    tool_calls: int | None = None,
    seconds: float | None = None,
) -> RaiseBudgetResult:
    """New budget figures (None: unchanged), checked before anything commits. Who raised it
    and to what is committed first, under the caller's tenant (another tenant's session is
    not found); the update carries that item's id and the figures, and the loop checks the
    tenant again."""
    request = RaiseBudgetInput(
        tenant_id=tenant_id,
        tokens=tokens,
        cost_usd=cost_usd,
        tool_calls=tool_calls,
        seconds=seconds,
    )
    check_budget_raise(request)
    check_text("decided_by", by)
    if not by.strip() or len(by) > MAX_DECIDER_CHARS:
        raise ValueError(f"who decides must be 1-{MAX_DECIDER_CHARS} characters")
    figures = {k: v for k, v in asdict(request).items() if k in _FIGURES and v is not None}
    async with sessions() as db, db.begin():
        row, _ = await ItemRepository(db, tenant_id).append(
            NewItem(
                session_id=session_uuid(session_id),
                kind=ItemKind.APPROVAL,
                role="user",
                idempotency_key=f"{workflow_id_for(session_id)}:budget:{uuid.uuid4()}",
                text=f"{by} raises the budget: "
                + ", ".join(f"{k} {v:g}" for k, v in figures.items()),
                data={"budget_raise": figures, "decided_by": by},
            )
        )
    request.decision_item_id = str(row.id)
    result: RaiseBudgetResult = await task_handle(client, session_id).execute_update(
        AgentWorkflow.raise_budget, request, id=f"raise_budget:{uuid.uuid4()}"
    )
    # Its sub-agents spend the same budget, checked with the figures they started with:
    # the raise reaches each one still under way, and one parked at it goes on.
    for child in await _live_descendants(sessions, tenant_id, session_uuid(session_id)):
        try:
            done: RaiseBudgetResult = await task_handle(client, str(child)).execute_update(
                AgentWorkflow.raise_budget, request, id=f"raise_budget:{uuid.uuid4()}"
            )
        except (RPCError, WorkflowUpdateFailedError):
            continue  # it ended meanwhile
        result.resumed = result.resumed or done.resumed
    return result


async def _live_descendants(
    sessions: async_sessionmaker[AsyncSession], tenant_id: str, root: uuid.UUID
) -> list[uuid.UUID]:
    ended = (*TERMINAL_STATUSES, SessionStatus.ARCHIVED)
    found: list[uuid.UUID] = []
    frontier = [root]
    async with sessions() as db:
        while frontier:  # delegation is at most MAX_DEPTH deep
            rows = await db.execute(
                select(SessionRow.id, SessionRow.status).where(
                    SessionRow.tenant_id == tenant_id, SessionRow.parent_id.in_(frontier)
                )
            )
            children = rows.all()
            frontier = [sid for sid, _ in children]
            found += [sid for sid, status in children if status not in ended]
    return found


_FIGURES = ("tokens", "cost_usd", "tool_calls", "seconds")
