"""Loading a deployment's agents (`agentctl worker --agents myapp.agents:AGENTS`, or
AGENT_DEFINITIONS) and building the model providers they choose."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from durable_agents.activities.agents import (
    DEFAULT_AGENT,
    Agent,
    AgentDefinitionError,
    ModelChoice,
    agents_by_name,
)
from durable_agents.activities.providers.base import ModelProvider
from durable_agents.activities.providers.factory import build_provider
from durable_agents.activities.tools.mcp_servers import McpServer
from durable_agents.workers.settings import ModelSettings
from durable_agents.workers.task_options import TaskOptions


class AgentLoadError(ValueError):
    """The agents named by a module path could not be loaded, with the reason."""


def load_agents(spec: str) -> list[Agent]:
    """The agents at `spec` ("package.module:ATTR"). ATTR may be an Agent, a list or tuple
    of them, a dict of them, or a function of no arguments returning one of those.

    The current directory is importable, as it is for `python -m`: a project's own module
    loads without installing it."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise AgentLoadError(
            f"agents {spec[:200]!r}: expected module:ATTR, e.g. myapp.agents:AGENTS"
        )
    if str(Path.cwd()) not in sys.path and "" not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise AgentLoadError(f"agents {spec!r}: cannot import {module_name!r}: {err}") from None
    value: object = getattr(module, attr, None)
    if value is None:
        raise AgentLoadError(f"agents {spec!r}: module {module_name!r} has no {attr!r}")
    if callable(value) and not isinstance(value, Agent):
        value = value()
    if isinstance(value, Agent):
        value = [value]
    elif isinstance(value, Mapping):
        value = list(value.values())
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise AgentLoadError(
            f"agents {spec!r}: {attr} is a {type(value).__name__}, not Agents (an Agent, a "
            "list or dict of them, or a function returning one)"
        )
    try:
        return list(agents_by_name(list(value)).values())
    except AgentDefinitionError as err:
        raise AgentLoadError(f"agents {spec!r}: {err}") from None


class Providers:
    """The model providers a worker's agents choose: the default one from MODEL_*, and one
    per other provider kind and tool mode an agent names (same endpoint settings, built
    once each)."""

    def __init__(self, settings: ModelSettings, default: ModelProvider) -> None:
        self._settings = settings
        self._default = default
        self._others: dict[tuple[str | None, str], ModelProvider] = {}

    def for_choice(self, choice: ModelChoice) -> ModelProvider:
        kind = choice.provider or self._settings.provider
        # Another provider kind does not inherit the worker's grammar mode (it is the
        # openai provider's): it gets its own default, auto.
        inherited = self._settings.tool_mode if kind == self._settings.provider else "auto"
        mode = choice.tool_mode or inherited
        if kind == self._settings.provider and mode == self._settings.tool_mode:
            return self._default
        if (kind, mode) not in self._others:
            chosen = self._settings.model_copy(update={"provider": kind, "tool_mode": mode})
            self._others[(kind, mode)] = build_provider(chosen)
        return self._others[(kind, mode)]

    async def aclose(self) -> None:
        for provider in self._others.values():
            await provider.aclose()


def servers_of(agents: Sequence[Agent], extra: Sequence[McpServer] = ()) -> list[McpServer]:
    """Every MCP server `agents` and `extra` declare, once each: a worker connects to a
    server once however many agents list it. One name must mean one declaration."""
    by_name: dict[str, McpServer] = {}
    for server in [*extra, *(s for a in agents for s in a.toolsets)]:
        known = by_name.setdefault(server.name, server)
        if known != server:
            raise AgentLoadError(f"two different MCP servers are named {server.name!r}")
    return list(by_name.values())


def agents_from(spec: str | None, extra: Sequence[Agent] = ()) -> list[Agent]:
    """The agents named by `spec` (if any) plus `extra`, as one list without duplicates."""
    loaded = load_agents(spec) if spec else []
    try:
        return list(agents_by_name([*loaded, *extra]).values())
    except AgentDefinitionError as err:
        raise AgentLoadError(str(err)) from None


def task_options_for(agent: str, definitions: str | None, **options: Any) -> TaskOptions:
    """A client's TaskOptions for agent `agent`. With the deployment's definitions at hand
    (AGENT_DEFINITIONS), an unknown name is refused before anything commits and the agent's
    limits apply; without them the name is sent as is and the worker resolves it."""
    if definitions is None or agent == DEFAULT_AGENT:
        return TaskOptions(agent=agent, **options)
    known = {a.name: a for a in load_agents(definitions)}
    if agent not in known:
        raise AgentLoadError(
            f"no agent named {agent[:64]!r} in {definitions}; defined: "
            f"{', '.join(sorted(known)) or 'none'} (and {DEFAULT_AGENT})"
        )
    return TaskOptions.for_agent(known[agent], **options)
