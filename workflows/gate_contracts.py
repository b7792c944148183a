"""What the gate (activities/policies/admission.py) and the loop say of a task's budget and
its tenant's quotas: the budget a task runs under, the figures a closed gate found, and why
an admission did not happen. Durable contracts, as workflows/contracts.py's."""

# No `from __future__ import annotations` in payload modules (see workflows/contracts.py).

from dataclasses import dataclass


@dataclass
class TaskBudget:
    """What a task may spend; None: no limit on that figure."""

    tokens: int | None = None
    cost_usd: float | None = None
    tool_calls: int | None = None
    seconds: float | None = None

    def limited(self) -> bool:
        return any(
            v is not None for v in (self.tokens, self.cost_usd, self.tool_calls, self.seconds)
        )


@dataclass
class BudgetFigures:
    """What a task had spent when it reached its budget; `reached` names the figures
    (tokens, cost_usd, tool_calls, seconds) at or past their limit."""

    reached: list[str]
    tokens: int = 0
    tool_calls: int = 0
    seconds: float = 0.0
    # None: some reply was unpriced, so the cost is not known (a cost budget then counts
    # as reached: it cannot be kept).
    cost_usd: float | None = 0.0
    # Reserved by the budget's model calls in flight, counted with `tokens` for a model
    # call: once they end, the budget may hold again without a raise.
    in_flight_tokens: int = 0


@dataclass
class QuotaReached:
    """Its tenant's quota a task reached before a step: which, in our words and numbers
    ("tokens_per_day reached: 120 of 100"), and when that period rolls over."""

    words: str
    # Seconds from the check to the next UTC day (or month) the quota counts afresh.
    resets_in_seconds: float = 0.0


@dataclass
class Closed:
    """Why the gate did not admit a model call, tool call or sub-agent (at most one is set):
    the tenant is frozen, the task's budget or a tenant quota is reached. Nothing ran or was
    committed; the loop parks and asks again under the same key once woken."""

    frozen: bool = False
    budget: BudgetFigures | None = None
    quota: QuotaReached | None = None
