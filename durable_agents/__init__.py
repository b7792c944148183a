"""durable-agents: durable AI-agent loops on Temporal, whose history holds refs, with AgentState
in PostgreSQL and artifacts in S3.

    from durable_agents import Agent, connect, serve, tool

The names below are the public API. Each is imported on first use, so `import durable_agents`
(and the workflow sandbox importing `durable_agents.workflows`) loads nothing else. The layers
install under this one name: `durable_agents.workflows` (the deterministic loop),
`durable_agents.activities` (the Temporal edges and the Temporal-free domain beside them),
`durable_agents.storage` (AgentState and the artifact store), `durable_agents.workers` (the
processes, the CLI, the gateway and the client) and `durable_agents.vocabulary` (the leaf terms
every layer shares).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from durable_agents.workers.api import (
        DEFAULT_AGENT,
        FILE_TOOLS,
        Agent,
        AgentClient,
        AgentStatus,
        Limits,
        McpHttp,
        McpStdio,
        ModelChoice,
        PendingApproval,
        Task,
        TaskOptions,
        TaskResult,
        Tool,
        ToolContext,
        ToolError,
        ToolOutput,
        assert_replays,
        builtin_tools,
        connect,
        export_cassette,
        serve,
        tenant_priority,
        tool,
    )
    from durable_agents.workers.peers.claim_check_plugin import ClaimCheckPlugin
    from durable_agents.workers.peers.openai_agents_session import AgentStateSession
    from durable_agents.workers.peers.pydantic_ai_history import AgentStateHistory
    from durable_agents.workflows.contracts import AgentInput, ApproveInput, TaskSettings

# Where each public name lives, when not in the Python API (workers/api.py).
_API = "durable_agents.workers.api"
_ELSEWHERE = {
    # An agent written for another SDK, on our storage (docs/other-sdks.md).
    "ClaimCheckPlugin": "durable_agents.workers.peers.claim_check_plugin",
    "AgentStateSession": "durable_agents.workers.peers.openai_agents_session",
    "AgentStateHistory": "durable_agents.workers.peers.pydantic_ai_history",
    # What a plain Temporal client sends (docs/temporal-clients.md).
    "AgentInput": "durable_agents.workflows.contracts",
    "ApproveInput": "durable_agents.workflows.contracts",
    "TaskSettings": "durable_agents.workflows.contracts",
}

__all__ = [
    "DEFAULT_AGENT",
    "FILE_TOOLS",
    "Agent",
    "AgentClient",
    "AgentInput",
    "AgentStateHistory",
    "AgentStateSession",
    "AgentStatus",
    "ApproveInput",
    "ClaimCheckPlugin",
    "Limits",
    "McpHttp",
    "McpStdio",
    "ModelChoice",
    "PendingApproval",
    "Task",
    "TaskOptions",
    "TaskResult",
    "TaskSettings",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "assert_replays",
    "builtin_tools",
    "connect",
    "export_cassette",
    "serve",
    "tenant_priority",
    "tool",
]


# The layers, as attributes too: `import durable_agents.workflows.contracts` then
# `durable_agents.workflows.contracts.X` works where this package was imported afresh and
# the layer passed through from elsewhere (the workflow sandbox does both).
_LAYERS = frozenset({"workflows", "activities", "storage", "workers", "vocabulary"})


def __getattr__(name: str) -> Any:
    if name in _LAYERS:
        return import_module(f"{__name__}.{name}")
    if name not in __all__:
        raise AttributeError(f"module 'durable_agents' has no attribute {name!r}")
    value = getattr(import_module(_ELSEWHERE.get(name, _API)), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
