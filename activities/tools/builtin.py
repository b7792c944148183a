"""The built-in tool set: each a typed function made a Tool by @tool (see typed)."""

from __future__ import annotations

from durable_agents.activities.tools.base import (
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    ToolRegistry,
)
from durable_agents.activities.tools.file_append import append_file_tool
from durable_agents.activities.tools.file_edits import edit_file_tool
from durable_agents.activities.tools.files import (
    DEFAULT_READ_CAP_BYTES,
    list_dir_tool,
    make_read_file_tool,
    write_file_tool,
)
from durable_agents.activities.tools.memory import memory_tools
from durable_agents.activities.tools.read_artifact import read_artifact_tool
from durable_agents.activities.tools.search import search_files_tool
from durable_agents.activities.tools.typed import tool
from durable_agents.activities.tools.web import fetch_url_tool

# Tools the agent loop itself runs (not an activity): never served by a device.
WORKFLOW_TOOLS = frozenset({"delegate"})
# What a task on the workspace's files needs, and no more: `builtin_tools(*FILE_TOOLS)`. A
# small model offered fewer tools reads fewer schemas and picks among fewer names.
FILE_TOOLS = (
    "list_dir",
    "read_file",
    "search_files",
    "write_file",
    "edit_file",
    "append_file",
)


# Idempotent: the loop starts the child workflow under an id derived from the call's key,
# so a replayed or retried delegation finds the same child instead of starting another.
@tool(effect="idempotent", name="delegate")
async def delegate_tool(ctx: ToolContext, task: str, agent: str | None = None) -> ToolOutput:
    """Hand a self-contained sub-task to a sub-agent with its own session. You receive its
    final summary and references to the artifacts it produced.

    Args:
        task: What the sub-agent should do.
        agent: A short name for the sub-agent.
    """
    # The loop starts a child workflow for `delegate`; an activity can't, so never runs it.
    raise ToolError("NotRunnable", "delegate is run by the agent loop, not as an activity")


DELEGATE_SPEC = delegate_tool.spec


def builtin_tools(*names: str, read_cap_bytes: int = DEFAULT_READ_CAP_BYTES) -> list[Tool]:
    """Return the built-in tools (only those `names` names, when given), each with its
    effect and approval policy: `Agent(tools=[*builtin_tools("read_file"), my_tool])`.

    Only write_file, edit_file and append_file change the workspace, so only they need
    approval: write_file always, edit_file and append_file when their file exists
    (`exists:path`; on a missing file edit_file fails unasked, append_file creates it).
    """
    every = [
        make_read_file_tool(read_cap_bytes),
        write_file_tool,
        edit_file_tool,
        append_file_tool,
        list_dir_tool,
        search_files_tool,
        fetch_url_tool,
        *memory_tools(),
        read_artifact_tool,
        delegate_tool,
    ]
    if not names:
        return every
    by_name = {t.spec.name: t for t in every}
    unknown = sorted(set(names) - by_name.keys())
    if unknown:
        raise ValueError(f"no built-in tool {unknown}; they are: {', '.join(by_name)}")
    return [by_name[n] for n in dict.fromkeys(names)]


def default_registry() -> ToolRegistry:
    """Return a registry holding the built-in tools with default limits."""
    return ToolRegistry.of(builtin_tools())
