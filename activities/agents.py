"""Agent definitions: what a user writes to bring their own agent.

An Agent names its instructions, model, tools, MCP toolsets, approval policies, device
tools, limits and the check its tasks must pass. One worker serves many; a task names the
one it runs. The definition's fingerprint (sha256 of everything the model or the loop
would act on differently) joins the turn's recorded context config, so a deploy mid-turn
keeps what the turn began with.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from durable_agents.activities.checks.spec import Check
from durable_agents.activities.policies.approval_policy import PolicyError
from durable_agents.activities.policies.approval_policy import validate as validate_policy
from durable_agents.activities.policies.task_rules import (
    BUDGET_FIGURES,
    InvalidTaskInput,
    check_budget_figure,
)
from durable_agents.activities.providers.tool_grammar import TOOL_MODES, ToolMode
from durable_agents.activities.tools.base import Tool
from durable_agents.activities.tools.mcp_servers import McpServer, identity_of

# The agent the worker's settings describe (AGENT_SYSTEM_PROMPT, the built-in tools): what a
# task runs when it names none, and what every session recorded before agents runs.
DEFAULT_AGENT = "default"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
ProviderName = Literal["openai", "anthropic", "offline", "scripted"]


class AgentDefinitionError(ValueError):
    """An agent definition that cannot be served, with the reason."""


@dataclass(frozen=True)
class ModelChoice:
    """The agent's model. Unset fields take the worker's MODEL_* settings; credentials and
    endpoints always come from the worker's environment, never from a definition.

    `tool_mode` (MODEL_TOOL_MODE for the worker's own): how the openai provider offers
    tools, native, grammar (in the prompt, the reply held to one call or an answer), or
    auto (grammar on llama.cpp's server); activities/providers/tool_grammar.py says why."""

    provider: ProviderName | None = None
    name: str | None = None
    context_tokens: int | None = None
    reply_tokens: int | None = None
    tool_mode: ToolMode | None = None

    def __post_init__(self) -> None:
        if self.tool_mode is not None and self.tool_mode not in TOOL_MODES:
            raise AgentDefinitionError(
                f"model tool_mode must be one of {', '.join(TOOL_MODES)}, "
                f"got {str(self.tool_mode)[:40]!r}"
            )
        if self.tool_mode == "grammar" and self.provider not in (None, "openai"):
            raise AgentDefinitionError(
                f"model tool_mode grammar is for the openai provider, not {self.provider}"
            )
        for label, value in (
            ("context_tokens", self.context_tokens),
            ("reply_tokens", self.reply_tokens),
        ):
            if value is not None and value <= 0:
                raise AgentDefinitionError(f"model {label} must be positive, got {value}")


@dataclass(frozen=True)
class Limits:
    """Per-task limits a task gets from its agent unless it sets its own."""

    max_steps: int | None = None
    tool_timeout_seconds: float | None = None
    # A task's budget by default (activities/policies/task_rules.py bounds them): tokens in and
    # out, cost in USD, tool calls, seconds since the task started.
    budget_tokens: int | None = None
    budget_cost_usd: float | None = None
    budget_tool_calls: int | None = None
    budget_seconds: float | None = None
    # Replies without progress in a row, or failures of one call, that end a task stuck.
    stuck_after: int | None = None

    def budget(self) -> dict[str, int | float | None]:
        """The budget figures by name (tokens, cost_usd, tool_calls, seconds)."""
        return {
            "tokens": self.budget_tokens,
            "cost_usd": self.budget_cost_usd,
            "tool_calls": self.budget_tool_calls,
            "seconds": self.budget_seconds,
        }

    def __post_init__(self) -> None:
        if self.max_steps is not None and self.max_steps <= 0:
            raise AgentDefinitionError(f"max_steps must be positive, got {self.max_steps}")
        if self.tool_timeout_seconds is not None and self.tool_timeout_seconds <= 0:
            raise AgentDefinitionError("tool_timeout_seconds must be positive")
        if self.stuck_after is not None and self.stuck_after <= 0:
            raise AgentDefinitionError(f"stuck_after must be positive, got {self.stuck_after}")
        for name, high, integer in BUDGET_FIGURES:
            try:
                check_budget_figure(
                    f"budget_{name}", getattr(self, f"budget_{name}"), high, integer
                )
            except InvalidTaskInput as err:
                raise AgentDefinitionError(str(err)) from None


@dataclass(frozen=True)
class Agent:
    """One agent: `tools` are Tools (e.g. from the `@tool` decorator, or `builtin_tools()`),
    `toolsets` MCP server declarations, `approvals` tool name (or `server.tool`) -> policy
    (never, always, outside:DIR, match:ARG:REGEX, exists:ARG), `device_tools` the tools that
    run on the user's device when a task names one."""

    name: str
    instructions: str
    tools: Sequence[Tool] = ()
    toolsets: Sequence[McpServer] = ()
    model: ModelChoice = field(default_factory=ModelChoice)
    approvals: Mapping[str, str] = field(default_factory=dict)
    device_tools: Sequence[str] = ()
    limits: Limits = field(default_factory=Limits)
    # How a task of this agent is checked before its answer is accepted (None: it is not,
    # and its tasks complete unchecked).
    check: Check | None = None

    def __post_init__(self) -> None:
        check_agent_name(self.name)
        if self.check is not None and not isinstance(self.check, Check):
            raise AgentDefinitionError(f"agent {self.name!r}: check must be a Check")
        if not self.instructions.strip():
            raise AgentDefinitionError(f"agent {self.name!r} has no instructions")
        # Frozen, but hand in lists and dicts freely: keep private copies.
        object.__setattr__(self, "tools", tuple(self.tools))
        object.__setattr__(self, "toolsets", tuple(self.toolsets))
        object.__setattr__(self, "device_tools", tuple(self.device_tools))
        object.__setattr__(self, "approvals", dict(self.approvals))
        names = [t.spec.name for t in self.tools]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise AgentDefinitionError(f"agent {self.name!r} lists tools twice: {twice}")
        servers = [s.name for s in self.toolsets]
        if len(set(servers)) != len(servers):
            raise AgentDefinitionError(f"agent {self.name!r} declares a toolset name twice")
        for tool, policy in self.approvals.items():
            try:
                validate_policy(policy)
            except PolicyError as err:
                raise AgentDefinitionError(f"agent {self.name!r}, tool {tool!r}: {err}") from None

    def fingerprint(self, tool_specs: Sequence[dict[str, Any]] = ()) -> str:
        """sha256 of the definition; `tool_specs`: the toolsets' listed tools, when known."""
        body = {
            "name": self.name,
            "instructions": self.instructions,
            # A tool mode left unset is left out, as unset budget figures are below: a
            # definition without one keeps the fingerprint it had before there were modes.
            "model": {
                k: v for k, v in asdict(self.model).items() if v is not None or k != "tool_mode"
            },
            "tools": [_tool_identity(t) for t in self.tools],
            "toolsets": [identity_of(s) for s in self.toolsets],
            "toolset_tools": list(tool_specs),
            "approvals": dict(sorted(self.approvals.items())),
            "device_tools": sorted(self.device_tools),
            # Budget figures and stuck_after left unset are left out: a definition without
            # them keeps the fingerprint it had before they existed.
            "limits": {
                k: v
                for k, v in asdict(self.limits).items()
                if v is not None or not (k.startswith("budget_") or k == "stuck_after")
            },
        }
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()


def _tool_identity(tool: Tool) -> dict[str, Any]:
    return {
        **asdict(tool.spec),
        "effect": tool.effect,
        "needs_approval": tool.needs_approval,
        "reconciles": tool.reconcile is not None,
        # Left out when unset: a tool without its own policy keeps the fingerprint it had.
        **({"approval": tool.approval} if tool.approval else {}),
    }


def agents_by_name(agents: Sequence[Agent]) -> dict[str, Agent]:
    """Index a worker's agents, refusing two of one name (and a non-Agent in the list)."""
    out: dict[str, Agent] = {}
    for agent in agents:
        if not isinstance(agent, Agent):
            raise AgentDefinitionError(f"not an Agent: {type(agent).__name__}")
        if agent.name in out:
            raise AgentDefinitionError(f"two agents are named {agent.name!r}")
        out[agent.name] = agent
    return out


def check_agent_name(name: str) -> str:
    """`name` if it could name an agent, else AgentDefinitionError (before anything commits)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise AgentDefinitionError(
            f"agent name {str(name)[:80]!r} must be 1-64 letters, digits, '_' or '-'"
        )
    return name
