"""The options a task runs with: one type from every door to the loop.

TaskOptions (workers/task_options.py) is this type plus what only a start reads (tenant,
agent, project, model config, loosened approvals, task queue); AgentInput carries this
type as `settings`, beside its ids and cursors. A payload: settings only, never content.
"""

# No `from __future__ import annotations` in payload modules (see workflows/contracts.py).

import copy
from dataclasses import dataclass, field, fields, replace

from durable_agents.workflows.gate_contracts import TaskBudget

# What a task gets when neither it nor its agent's Limits set them.
DEFAULT_MAX_STEPS = 24
DEFAULT_TOOL_TIMEOUT_SECONDS = 120.0
# Replies in a row without progress, or repeats of one failing call, that end a task stuck.
DEFAULT_STUCK_AFTER = 5

BUDGET_NAMES = ("tokens", "cost_usd", "tool_calls", "seconds")


@dataclass
class TaskSettings:
    # None (a plain start that leaves it unset): its agent's Limits, else DEFAULT_MAX_STEPS.
    max_steps: int | None = None
    device_id: str | None = None
    # Tools that run on the device's own task queue when device_id is set.
    device_tools: list[str] = field(default_factory=list)
    # Per-task approval policies: tool name -> "never" | "always" | "outside:DIR" | "match:A:RE".
    # Each only adds approvals to what the agent asks for.
    approval_policies: dict[str, str] = field(default_factory=dict)
    approval_timeout_seconds: float = 24 * 3600
    # None: its agent's Limits, else DEFAULT_TOOL_TIMEOUT_SECONDS.
    tool_timeout_seconds: float | None = None
    device_schedule_to_start_seconds: float = 3600
    # How many device calls may be pending at once while the loop goes on; one more is
    # not run and the model is told (DevicePendingLimit).
    max_pending_device_calls: int = 4
    # How long one model call (or compaction) may keep failing with ModelUnavailable before
    # the task fails: a provider outage is outwaited, not fatal.
    model_outage_seconds: float = 6 * 3600
    # The cap on the pause between two model call attempts during an outage.
    model_retry_max_interval_seconds: float = 60
    # Forces continue-as-new after this many steps in one run (0 = only when suggested).
    continue_as_new_every: int = 0
    # The task ends `stuck` after this many replies in a row without progress, or this many
    # failures of one call (workflows/progress.py). None: its agent's Limits, else
    # DEFAULT_STUCK_AFTER.
    stuck_after: int | None = None
    # The task's budget (None: no limit on that figure), checked at the gate against what
    # is committed: tokens in and out, cost in USD (priced replies), tool calls, and seconds
    # since the session was created. A raise replaces the figures it names.
    budget_tokens: int | None = None
    budget_cost_usd: float | None = None
    budget_tool_calls: int | None = None
    budget_seconds: float | None = None

    def step_limit(self) -> int:
        return self.max_steps if self.max_steps is not None else DEFAULT_MAX_STEPS

    def tool_timeout(self) -> float:
        t = self.tool_timeout_seconds
        return t if t is not None else DEFAULT_TOOL_TIMEOUT_SECONDS

    def stuck_limit(self) -> int:
        return self.stuck_after if self.stuck_after is not None else DEFAULT_STUCK_AFTER

    def unresolved(self) -> bool:
        """A setting is left to the agent's Limits: the run resolves it before its loop."""
        return (
            self.max_steps is None or self.tool_timeout_seconds is None or self.stuck_after is None
        )

    def budget(self) -> TaskBudget | None:
        """The budget the gate checks; None when the task has none."""
        budget = TaskBudget(
            self.budget_tokens, self.budget_cost_usd, self.budget_tool_calls, self.budget_seconds
        )
        return budget if budget.limited() else None

    def loop_settings(self) -> "TaskSettings":
        """These settings alone, as the loop's input carries them (a TaskOptions' own
        start-only fields dropped)."""
        return TaskSettings(
            **{f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(TaskSettings)}
        )

    def with_defaults(
        self,
        max_steps: int,
        tool_timeout_seconds: float,
        budget: TaskBudget,
        stuck_after: int,
    ) -> "TaskSettings":
        """These settings with every one left unset taken from the figures given."""
        figures = {
            f"budget_{name}": getattr(budget, name)
            for name in BUDGET_NAMES
            if getattr(self, f"budget_{name}") is None
        }
        return replace(
            copy.deepcopy(self),
            max_steps=self.max_steps if self.max_steps is not None else max_steps,
            tool_timeout_seconds=self.tool_timeout_seconds
            if self.tool_timeout_seconds is not None
            else tool_timeout_seconds,
            stuck_after=self.stuck_after if self.stuck_after is not None else stuck_after,
            **figures,
        )

    def raised(self, raise_: TaskBudget) -> "TaskSettings":
        """These settings with the figures `raise_` gives replacing the budget's own."""
        changes = {
            f"budget_{name}": getattr(raise_, name)
            for name in BUDGET_NAMES
            if getattr(raise_, name) is not None
        }
        return replace(copy.deepcopy(self), **changes)
