"""The agents one worker serves, resolved: each with its provider, its tool registry and the
context config a new turn of it records. Activities look a session's agent up here by the
name AgentState holds for it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace

from temporalio.exceptions import ApplicationError

from durable_agents.activities.agents import DEFAULT_AGENT, Agent, ModelChoice, agents_by_name
from durable_agents.activities.context.assembly import ContextBudget
from durable_agents.activities.context.model_context import config_of
from durable_agents.activities.errors import non_retryable
from durable_agents.activities.providers.base import ModelProvider
from durable_agents.activities.tools.base import Tool, ToolRegistry
from durable_agents.storage.context_configs import ContextConfig

# How many agent names an UnknownAgent error lists.
_MAX_LISTED = 20


@dataclass(frozen=True)
class AgentRuntime:
    name: str
    provider: ModelProvider
    registry: ToolRegistry
    # What a new turn of this agent records (the turn keeps it through a deploy).
    config: ContextConfig
    # Its device-local MCP servers: their tools come from what the task's device registered.
    device_servers: frozenset[str] = frozenset()
    # The tools that run on the task's device (with_device_tools adds them).
    on_device: frozenset[str] = frozenset()

    def with_device_tools(self, tools: Sequence[Tool]) -> AgentRuntime:
        """This agent for a task on a device that serves `tools` (its device-local MCP
        servers' tools, as the device registered them)."""
        if not tools:
            return self
        registry = ToolRegistry.of([*self.registry.tools.values(), *tools])
        if len(registry.tools) != len(self.registry.tools) + len(tools):
            raise non_retryable(
                "DeviceToolClash", f"a device tool of agent {self.name!r} has another tool's name"
            )
        schemas = [asdict(t.spec) for t in registry.tools.values()]
        config = replace(self.config, tool_schemas=schemas)
        names = frozenset(t.spec.name for t in tools)
        return replace(self, registry=registry, config=config, on_device=names)


def default_runtime(
    provider: ModelProvider,
    registry: ToolRegistry,
    *,
    model: str,
    system_prompt: str,
    budget: ContextBudget,
) -> AgentRuntime:
    """The worker's settings as an agent: its prompt, the given registry, no approvals
    beyond the tools' own."""
    config = config_of(provider.name, model, system_prompt, registry.specs(), budget)
    return AgentRuntime(DEFAULT_AGENT, provider, registry, config)


def resolve(
    agent: Agent,
    *,
    provider_for: Callable[[ModelChoice], ModelProvider],
    model: str,
    budget: ContextBudget,
    toolset_tools: Mapping[str, Sequence[Tool]] = {},
) -> AgentRuntime:
    """`agent` ready to serve: `model`/`budget` fill what its ModelChoice leaves unset;
    `toolset_tools`: the tools each declared toolset listed, by toolset name."""
    provider = provider_for(agent.model)
    listed = [t for s in agent.toolsets for t in toolset_tools.get(s.name, ())]
    registry = ToolRegistry.of([*agent.tools, *listed])
    if len(registry.tools) != len(agent.tools) + len(listed):
        raise ValueError(f"agent {agent.name!r}: a toolset's tool has the name of another tool")
    sized = replace(
        budget,
        context_tokens=agent.model.context_tokens or budget.context_tokens,
        reply_tokens=agent.model.reply_tokens or budget.reply_tokens,
    )
    config = config_of(
        provider.name, agent.model.name or model, agent.instructions, registry.specs(), sized
    )
    fingerprint = agent.fingerprint([asdict(t.spec) for t in listed])
    identity = {"name": agent.name, "sha256": fingerprint, "approvals": dict(agent.approvals)}
    device_servers = frozenset(s.name for s in agent.toolsets if s.device_local)
    return AgentRuntime(
        agent.name, provider, registry, replace(config, agent=identity), device_servers
    )


class AgentCatalog:
    """Agents by name; the default agent is always there."""

    def __init__(self, default: AgentRuntime, others: Sequence[AgentRuntime] = ()) -> None:
        self._runtimes = {default.name: default}
        for runtime in others:
            if runtime.name in self._runtimes:
                raise ValueError(f"two agents are named {runtime.name!r}")
            self._runtimes[runtime.name] = runtime

    @property
    def default(self) -> AgentRuntime:
        return self._runtimes[DEFAULT_AGENT]

    def names(self) -> list[str]:
        return sorted(self._runtimes)

    def registries(self) -> dict[str, ToolRegistry]:
        """Each agent's tools, by agent name (what run_tool needs)."""
        return {name: runtime.registry for name, runtime in self._runtimes.items()}

    def get(self, name: str) -> AgentRuntime:
        """The runtime of agent `name`; a non-retryable UnknownAgent error when this worker
        does not serve it (a task started for an agent no worker was deployed with)."""
        runtime = self._runtimes.get(name)
        if runtime is None:
            raise unknown_agent(name, self.names())
        return runtime


def unknown_agent(name: str, known: list[str]) -> ApplicationError:
    shown = ", ".join(known[:_MAX_LISTED]) + (" …" if len(known) > _MAX_LISTED else "")
    return non_retryable(
        "UnknownAgent", f"no agent named {name[:64]!r} on this worker; it serves: {shown}"
    )


def build_catalog(
    default: AgentRuntime,
    agents: Sequence[Agent],
    *,
    provider_for: Callable[[ModelChoice], ModelProvider],
    model: str,
    budget: ContextBudget,
    toolset_tools: Mapping[str, Sequence[Tool]] = {},
) -> AgentCatalog:
    """The catalog of `default` plus `agents` (an agent named "default" replaces it)."""
    resolved = [
        resolve(
            a, provider_for=provider_for, model=model, budget=budget, toolset_tools=toolset_tools
        )
        for a in agents_by_name(agents).values()
    ]
    base = next((r for r in resolved if r.name == DEFAULT_AGENT), default)
    return AgentCatalog(base, [r for r in resolved if r.name != DEFAULT_AGENT])
