"""The one gate every admission inside the loop passes: each model call, each tool call
(approved, edited or on a device) and each sub-agent, checked against the tenant's kill
switch, the task's budget (its root task's, for a sub-agent) and the tenant's quotas, and
recorded in the admissions ledger (storage/admissions.py) in the same transaction.

A closed gate calls nothing and commits nothing: the loop parks the task (frozen,
budget_exhausted, quota_exhausted) and asks again under the same key once woken. A refusal
(a sub-agent past the task's cap, or past the tenant's running tasks) is not a park: the
model gets a result it can read and goes on without it.

The overshoot bound (docs/SECURITY.md). A model call is admitted only while committed spend
plus what the budget's calls in flight reserved is under the budget, and reserves its
largest possible usage (its context budget, which holds its input and its reply's
max_tokens): so a task tree's tokens exceed its budget by less than one call's reservation.
Tool calls and sub-agents are counted as they are admitted, under the budget's lock: a
budget of N tool calls runs exactly N, and a task starts at most its cap of sub-agents.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, time

from durable_agents.storage.admissions import MODEL, SUB_AGENT, Reservation
from durable_agents.storage.agent_state import AgentState
from durable_agents.storage.models import SessionRow
from durable_agents.storage.quotas import Quotas, next_period, spend_over
from durable_agents.storage.step_figures import StepFigures
from durable_agents.workflows.contracts import BudgetFigures, Closed, QuotaReached, TaskBudget


@dataclass(frozen=True)
class Admission:
    """What asks to be admitted: a `kind` (storage.admissions: model, tool, sub_agent) under
    its idempotency `key`, for `session`, against `budget` counted on `budget_session` (a
    sub-agent's root task; None: the session's own). A model call brings its reservation."""

    kind: str
    key: str
    session: SessionRow
    budget: TaskBudget | None
    budget_session: uuid.UUID | None = None
    reservation: Reservation | None = None


@dataclass(frozen=True)
class GateLimits:
    """The deployment's side: default quotas for the tenant, and how many sub-agents one
    task may start (None: no cap)."""

    quota_defaults: Quotas | None = None
    max_sub_agents: int | None = None


@dataclass(frozen=True)
class Refusal:
    """An admission refused for good: the model reads `words` as the call's result."""

    error_type: str
    words: str


@dataclass(frozen=True)
class Gate:
    """Open (nothing set), closed (`closed`: park and ask again) or refused."""

    closed: Closed | None = None
    refused: Refusal | None = None

    @property
    def admitted(self) -> bool:
        return self.closed is None and self.refused is None


OPEN = Gate()


async def admit(
    st: AgentState, request: Admission, limits: GateLimits, *, now: datetime | None = None
) -> Gate:
    """Decide and record `request` in `st`'s transaction (it must be one: agent_state with
    write=True). An admission already recorded under its key stands (a retry, a replay);
    a model call's reservation is renewed then."""
    now = now or datetime.now(UTC)
    session = request.session
    root = request.budget_session or session.id
    if request.kind == SUB_AGENT:
        await st.controls.lock_starts()  # a sub-agent takes a place among running tasks
    await st.admissions.lock(root)
    figures = await st.controls.step_figures(
        session.id, budget_session=root, day=now.date(), admission_key=request.key
    )
    if figures.admitted:
        if request.kind == MODEL:
            await st.admissions.renew(request.key)
        return OPEN
    gate = await _decide(st, request, limits, figures, now)
    if gate.admitted:
        await st.admissions.admit(
            request.key,
            request.kind,
            session_id=session.id,
            budget_session_id=root,
            reservation=request.reservation if request.kind == MODEL else None,
        )
    return gate


async def closed_now(
    st: AgentState,
    session: SessionRow,
    budget: TaskBudget | None,
    limits: GateLimits,
    *,
    now: datetime | None = None,
) -> Closed | None:
    """Why the gate would not admit the task's next model call now (None: it would), by the
    checks `admit` makes; nothing is locked or recorded."""
    now = now or datetime.now(UTC)
    root = session.root_id or session.id
    figures = await st.controls.step_figures(session.id, budget_session=root, day=now.date())
    request = Admission(MODEL, "", session, budget, budget_session=root)
    return (await _decide(st, request, limits, figures, now)).closed


async def _decide(
    st: AgentState, request: Admission, limits: GateLimits, figures: StepFigures, now: datetime
) -> Gate:
    """Frozen first (nothing of the tenant runs), then the budget, the tenant's spend
    quotas, and for a sub-agent the task's cap and the tenant's running tasks."""
    if figures.frozen:
        return Gate(Closed(frozen=True))
    if request.budget is not None:
        reached = budget_figures(
            figures, request.session, request.budget, now, reserved=request.kind == MODEL
        )
        if reached is not None:
            return Gate(Closed(budget=reached))
    quotas = figures.quotas.over(limits.quota_defaults)
    if quotas.spend_limited():
        for period, spent in (("day", figures.day), ("month", figures.month)):
            words = spend_over(quotas, period, spent)
            if words is not None:
                resets = datetime.combine(next_period(now.date(), period == "month"), time(), UTC)
                wait = round((resets - now).total_seconds(), 3)
                return Gate(Closed(quota=QuotaReached(words, resets_in_seconds=wait)))
    if request.kind != SUB_AGENT:
        return OPEN
    cap = limits.max_sub_agents
    if cap is not None and figures.session_sub_agents >= cap:
        return Gate(
            refused=Refusal(
                "SubAgentLimit",
                f"not started: this task has started {figures.session_sub_agents} of its "
                f"{cap} sub-agents (AGENT_MAX_SUB_AGENTS); do the rest without delegating",
            )
        )
    # The step figures hold the spend quotas only: a place among the running is read here.
    running = (await st.controls.quotas()).over(limits.quota_defaults).running_tasks
    if running is not None:
        have = await st.controls.running()
        if have >= running:
            return Gate(
                refused=Refusal(
                    "QuotaExceeded",
                    f"not started: quota running_tasks reached: {have} of {running}; "
                    "do the rest without delegating",
                )
            )
    return OPEN


def budget_figures(
    figures: StepFigures,
    session: SessionRow,
    budget: TaskBudget,
    now: datetime,
    *,
    reserved: bool = False,
) -> BudgetFigures | None:
    """The budget's figures when any is at or past its limit, else None. With `reserved`
    (a model call), what the budget's calls in flight reserved counts as spent."""
    seconds = (now - session.created_at).total_seconds()
    in_flight = figures.reserved_tokens if reserved else 0
    cost = None if figures.session_cost_usd is None else float(figures.session_cost_usd)
    if reserved and cost is not None:
        held = figures.reserved_cost_usd
        cost = None if held is None else cost + float(held)
    reached = []
    if budget.tokens is not None and figures.session_tokens + in_flight >= budget.tokens:
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
        cost_usd=None if figures.session_cost_usd is None else float(figures.session_cost_usd),
        in_flight_tokens=in_flight,
    )
