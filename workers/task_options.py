"""What a task may ask for when it starts, checked before anything is committed."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from typing import Any

from durable_agents.activities.agents import DEFAULT_AGENT, Agent, check_agent_name
from durable_agents.activities.policies.task_rules import (
    DEFAULT_MAX_STEPS,
    DEFAULT_TOOL_TIMEOUT_SECONDS,
    MAX_TOOL_TIMEOUT_SECONDS,
    InvalidTaskInput,
    check_model_config,
    check_policies,
    check_range,
    check_task_settings,
)
from durable_agents.activities.policies.task_rules import MAX_STEPS as MAX_STEPS
from durable_agents.workflows.contracts import AgentInput
from durable_agents.workflows.policies import CLOUD_TASK_QUEUE


@dataclass
class TaskOptions:
    tenant_id: str = "default"
    max_steps: int = DEFAULT_MAX_STEPS
    device_id: str | None = None
    device_tools: list[str] = field(default_factory=list)
    approval_policies: dict[str, str] = field(default_factory=dict)
    approval_timeout_seconds: float = 24 * 3600
    tool_timeout_seconds: float = DEFAULT_TOOL_TIMEOUT_SECONDS
    device_schedule_to_start_seconds: float = 3600
    max_pending_device_calls: int = AgentInput.max_pending_device_calls
    # How long a provider outage is outwaited, and the longest pause between model attempts.
    model_outage_seconds: float = AgentInput.model_outage_seconds
    model_retry_max_interval_seconds: float = AgentInput.model_retry_max_interval_seconds
    continue_as_new_every: int = 0
    task_queue: str = CLOUD_TASK_QUEUE
    model_config: dict[str, Any] = field(default_factory=dict)
    # Names the shared workspace under AGENT_WORKSPACE_SCOPE=project; stored with the session.
    project: str | None = None
    # The agent definition the task runs (stored with the session; workers resolve it).
    agent: str = DEFAULT_AGENT
    # Policies that replace the agent's own for these tools, so they may ask less: only a
    # caller whose scopes allow it sets them (workers/client/commands.py), and who did is committed
    # with the session (`loosened_by`). approval_policies above can only add approvals.
    loosened_approvals: dict[str, str] = field(default_factory=dict)
    loosened_by: str | None = None
    # The task's budget (None: no limit on that figure); AgentInput's fields of the same
    # names. Defaults: the agent's Limits, then the tenant's (workers/client/commands.py).
    budget_tokens: int | None = None
    budget_cost_usd: float | None = None
    budget_tool_calls: int | None = None
    budget_seconds: float | None = None

    def __post_init__(self) -> None:
        """Refuse options that would fail the task at once, make it wait forever or load
        every worker, so nothing is committed for them (InvalidTaskInput naming the field)."""
        check_task_settings(self)
        # Set on every start through this layer (a plain start's input may leave them).
        check_range("max_steps", self.max_steps, 1, MAX_STEPS, open_low=False)
        check_range(
            "tool_timeout_seconds",
            self.tool_timeout_seconds,
            0,
            MAX_TOOL_TIMEOUT_SECONDS,
            open_low=True,
        )
        self.approval_policies = dict(self.approval_policies)
        self.loosened_approvals = dict(self.loosened_approvals)
        check_policies("loosened_approvals", self.loosened_approvals)
        if self.loosened_approvals and not self.loosened_by:
            raise InvalidTaskInput("loosened_by", "loosened approvals need who loosened them")
        check_model_config(self.model_config)
        if not self.task_queue:
            raise InvalidTaskInput("task_queue", "task_queue is empty")
        check_agent_name(self.agent)

    def approvals_record(self) -> dict[str, Any]:
        """What the session keeps of its approvals (SessionRow.approvals)."""
        return {
            "policies": dict(self.approval_policies),
            "loosened": dict(self.loosened_approvals),
            "loosened_by": self.loosened_by,
        }

    @classmethod
    def for_agent(cls, agent: Agent, **options: Any) -> TaskOptions:
        """Options for a task of `agent`: its limits, and its device tools when the task
        names a device; anything passed in `options` wins."""
        defaults: dict[str, Any] = {"agent": agent.name}
        if agent.limits.max_steps is not None:
            defaults["max_steps"] = agent.limits.max_steps
        if agent.limits.tool_timeout_seconds is not None:
            defaults["tool_timeout_seconds"] = agent.limits.tool_timeout_seconds
        defaults |= {
            f"budget_{name}": value
            for name, value in agent.limits.budget().items()
            if value is not None
        }
        if options.get("device_id") is not None and agent.device_tools:
            defaults["device_tools"] = list(agent.device_tools)
        return cls(**{**defaults, **options})

    def agent_input(self, session_id: str, **overrides: Any) -> AgentInput:
        """The workflow's start input. Every AgentInput field these options also have carries
        over by name, so a setting added to both is never left behind here."""
        shared = {f.name for f in fields(AgentInput)} & {f.name for f in fields(self)}
        values = {name: copy.deepcopy(getattr(self, name)) for name in shared}
        return AgentInput(session_id=session_id, **{**values, **overrides})
