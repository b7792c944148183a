"""What a task may ask for when it starts, checked before anything is committed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from durable_agents.activities.agents import DEFAULT_AGENT, Agent, check_agent_name
from durable_agents.activities.checks.spec import Check, CheckSpecError
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
from durable_agents.workflows.task_settings import DEFAULT_STUCK_AFTER, TaskSettings


@dataclass
class TaskOptions(TaskSettings):
    """What a task may ask for when it starts: the settings it runs with (TaskSettings, which
    the loop's input carries) and what the start alone reads. Checked on construction."""

    # Set on every start through this layer: the agent's Limits, else these.
    max_steps: int = DEFAULT_MAX_STEPS
    tool_timeout_seconds: float = DEFAULT_TOOL_TIMEOUT_SECONDS
    stuck_after: int = DEFAULT_STUCK_AFTER
    tenant_id: str = "default"
    task_queue: str = CLOUD_TASK_QUEUE
    model_config: dict[str, Any] = field(default_factory=dict)
    # Names the shared workspace under AGENT_WORKSPACE_SCOPE=project; stored with the session.
    project: str | None = None
    # The agent definition the task runs (stored with the session; workers resolve it).
    agent: str = DEFAULT_AGENT
    # Policies that replace the agent's own for these tools, so they may ask less: only a
    # caller whose scopes allow it sets them (workers/client/commands.py), and who did is committed
    # with the session (`loosened_by`). approval_policies can only add approvals.
    loosened_approvals: dict[str, str] = field(default_factory=dict)
    loosened_by: str | None = None
    # How the task's success is checked, besides its agent's check: files that must exist
    # and texts they must contain ({"files": [...], "contains": {path: [text]}, "attempts":
    # n}, or a Check of those); kept with the session (activities/checks/spec.py).
    check: dict[str, Any] | None = None

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
        if self.check is not None:
            try:
                self.check = Check.from_start(self.check).declared()
            except CheckSpecError as err:
                raise InvalidTaskInput(err.field, str(err)) from None

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
        defaults["stuck_after"] = agent.limits.stuck_after or DEFAULT_STUCK_AFTER
        defaults |= {
            f"budget_{name}": value
            for name, value in agent.limits.budget().items()
            if value is not None
        }
        if options.get("device_id") is not None and agent.device_tools:
            defaults["device_tools"] = list(agent.device_tools)
        return cls(**{**defaults, **options})

    def agent_input(self, session_id: str) -> AgentInput:
        """The workflow's start input: the session, its tenant and these settings."""
        return AgentInput(session_id, self.tenant_id, self.loop_settings())
