"""What a task may ask for when it starts, checked before anything is committed."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from typing import Any

from activities.agents import DEFAULT_AGENT, Agent, check_agent_name
from activities.approval_policy import validate as validate_policy
from storage.devices import validate_device_id
from workflows.contracts import AgentInput
from workflows.policies import CLOUD_TASK_QUEUE

# Upper bounds a task may ask for: past them a value is a typo, not a plan.
MAX_STEPS = 10_000
MAX_APPROVAL_WAIT_SECONDS = 30 * 24 * 3600
MAX_TOOL_TIMEOUT_SECONDS = 24 * 3600
MAX_DEVICE_WAIT_SECONDS = 7 * 24 * 3600
MAX_MODEL_OUTAGE_SECONDS = 30 * 24 * 3600
MAX_MODEL_RETRY_INTERVAL_SECONDS = 3600
MAX_PENDING_DEVICE_CALLS = 64


def _check_range(name: str, value: float, low: float, high: float, *, open_low: bool) -> None:
    # Written so NaN fails too: every comparison with it is False.
    inside = (low < value if open_low else low <= value) and value <= high
    if not inside:
        bound = f"> {low:g}" if open_low else f">= {low:g}"
        raise ValueError(f"{name} must be {bound} and <= {high:g}, got {value!r}")


@dataclass
class TaskOptions:
    tenant_id: str = "default"
    max_steps: int = 24
    device_id: str | None = None
    device_tools: list[str] = field(default_factory=list)
    approval_overrides: dict[str, bool] = field(default_factory=dict)
    approval_policies: dict[str, str] = field(default_factory=dict)
    approval_timeout_seconds: float = 24 * 3600
    tool_timeout_seconds: float = 120
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

    def __post_init__(self) -> None:
        """Refuse options that would fail the task at once or make it wait forever, so
        nothing is committed for them (ValueError naming the field)."""
        _check_range("max_steps", self.max_steps, 1, MAX_STEPS, open_low=False)
        _check_range(
            "continue_as_new_every", self.continue_as_new_every, 0, MAX_STEPS, open_low=False
        )
        _check_range(
            "max_pending_device_calls",
            self.max_pending_device_calls,
            1,
            MAX_PENDING_DEVICE_CALLS,
            open_low=False,
        )
        for name, high in (
            ("approval_timeout_seconds", MAX_APPROVAL_WAIT_SECONDS),
            ("tool_timeout_seconds", MAX_TOOL_TIMEOUT_SECONDS),
            ("device_schedule_to_start_seconds", MAX_DEVICE_WAIT_SECONDS),
            ("model_outage_seconds", MAX_MODEL_OUTAGE_SECONDS),
            ("model_retry_max_interval_seconds", MAX_MODEL_RETRY_INTERVAL_SECONDS),
        ):
            _check_range(name, getattr(self, name), 0, high, open_low=True)
        if self.device_id is not None:
            validate_device_id(self.device_id)
        elif self.device_tools:
            raise ValueError("device_tools need a device_id to run on")
        if not self.task_queue:
            raise ValueError("task_queue is empty")
        check_agent_name(self.agent)
        for policy in self.approval_policies.values():
            validate_policy(policy)

    @classmethod
    def for_agent(cls, agent: Agent, **options: Any) -> TaskOptions:
        """Options for a task of `agent`: its limits, and its device tools when the task
        names a device; anything passed in `options` wins."""
        defaults: dict[str, Any] = {"agent": agent.name}
        if agent.limits.max_steps is not None:
            defaults["max_steps"] = agent.limits.max_steps
        if agent.limits.tool_timeout_seconds is not None:
            defaults["tool_timeout_seconds"] = agent.limits.tool_timeout_seconds
        if options.get("device_id") is not None and agent.device_tools:
            defaults["device_tools"] = list(agent.device_tools)
        return cls(**{**defaults, **options})

    def agent_input(self, session_id: str, **overrides: Any) -> AgentInput:
        """The workflow's start input. Every AgentInput field these options also have carries
        over by name, so a setting added to both is never left behind here."""
        shared = {f.name for f in fields(AgentInput)} & {f.name for f in fields(self)}
        values = {name: copy.deepcopy(getattr(self, name)) for name in shared}
        # The workflow hears approval overrides as policies.
        return AgentInput(session_id=session_id, **{**values, **overrides}).with_overrides_folded()
