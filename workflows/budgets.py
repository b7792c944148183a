"""A task's budget in the loop: a raise recorded and applied to the task's input, and the
park's note. Deterministic code only."""

from __future__ import annotations

from dataclasses import replace

from temporalio import workflow

from durable_agents.workflows.contracts import (
    AgentInput,
    BudgetFigures,
    BudgetRaiseRecordInput,
    RaiseBudgetInput,
    TaskBudget,
)
from durable_agents.workflows.state_writes import write_state_in_task

with workflow.unsafe.imports_passed_through():
    from durable_agents.activities.session_state import SessionStateActivities


def raised(inp: AgentInput, request: RaiseBudgetInput) -> AgentInput:
    """`inp` with the figures `request` gives replacing the budget's own."""
    figures = TaskBudget(request.tokens, request.cost_usd, request.tool_calls, request.seconds)
    return replace(inp, settings=inp.settings.raised(figures))


async def record_raise(inp: AgentInput, request: RaiseBudgetInput) -> None:
    """The loop's record of a raise it accepted, under its update's id."""
    update = workflow.current_update_info()
    key = f"{workflow.info().workflow_id}:budget:{update.id if update else ''}"
    await write_state_in_task(
        SessionStateActivities.record_budget_raise,
        BudgetRaiseRecordInput(
            inp.session_id,
            inp.tenant_id,
            key,
            request.decided_by,
            request.request_id,
            tokens=request.tokens,
            cost_usd=request.cost_usd,
            tool_calls=request.tool_calls,
            seconds=request.seconds,
        ),
    )


def budget_words(figures: BudgetFigures, budget: TaskBudget | None) -> str:
    """The park's note: our words and numbers only."""
    limits = {
        "tokens": budget.tokens if budget else None,
        "cost_usd": budget.cost_usd if budget else None,
        "tool_calls": budget.tool_calls if budget else None,
        "seconds": budget.seconds if budget else None,
    }
    spent = {
        "tokens": figures.tokens,
        "cost_usd": "unpriced" if figures.cost_usd is None else f"{figures.cost_usd:.6f}",
        "tool_calls": figures.tool_calls,
        "seconds": f"{figures.seconds:.0f}",
    }
    parts = [f"{name} {spent[name]} of {limits[name]}" for name in figures.reached]
    return "budget reached: " + ", ".join(parts)
