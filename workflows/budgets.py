"""A task's budget in the loop: the patch that marks runs which park at it, and a raise
applied to the task's input. Deterministic code only."""

from __future__ import annotations

from dataclasses import replace

from workflows.contracts import AgentInput, RaiseBudgetInput

# From this patch on, a model call that finds the budget reached parks the task as
# budget_exhausted until a raise; runs recorded before never got such a result.
BUDGETS_PATCH = "task-budgets"

RAISABLE = ("tokens", "cost_usd", "tool_calls", "seconds")


def raised(inp: AgentInput, request: RaiseBudgetInput) -> AgentInput:
    """`inp` with the figures `request` gives replacing the budget's own."""
    changes = {
        f"budget_{name}": getattr(request, name)
        for name in RAISABLE
        if getattr(request, name) is not None
    }
    return replace(inp, **changes)
