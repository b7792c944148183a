"""The built-in tool set: what the model sees (specs) plus the policy for each tool."""

from __future__ import annotations

from typing import Any

from activities.providers.base import ToolSpec
from activities.tools.base import Tool, ToolContext, ToolError, ToolOutput, ToolRegistry
from activities.tools.files import (
    DEFAULT_READ_CAP_BYTES,
    MAX_LIST_ENTRIES,
    list_dir,
    make_read_file,
    reconcile_write_file,
    write_file,
)
from activities.tools.memory import memory_tools
from activities.tools.web import fetch_url

_PATH = {
    "type": "string",
    "description": "Path relative to the workspace root, e.g. 'src/app.py'.",
}

READ_FILE_SPEC = ToolSpec(
    name="read_file",
    description=(
        "Read a file from the workspace and return its bytes. Large files are fine; "
        "pass max_bytes to read only the beginning."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": _PATH,
            "max_bytes": {
                "type": "integer",
                "minimum": 1,
                "description": "Read at most this many bytes from the start of the file.",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    },
)

WRITE_FILE_SPEC = ToolSpec(
    name="write_file",
    description=(
        "Create or replace a UTF-8 text file in the workspace (parent directories are "
        "created). Returns JSON with path, bytes, sha256 and already_applied."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": _PATH,
            "content": {"type": "string", "description": "The complete new file content."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    },
)

LIST_DIR_SPEC = ToolSpec(
    name="list_dir",
    description=(
        "List a workspace directory as JSON entries {path, type: file|dir, size}, sorted; "
        "recursive=true lists every file below it at once. "
        f"At most {MAX_LIST_ENTRIES} entries; 'truncated' tells whether more exist."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {
                **_PATH,
                "description": "Directory relative to the workspace root.",
                "default": ".",
            },
            "recursive": {
                "type": "boolean",
                "default": False,
                "description": "Also list everything below subdirectories.",
            },
        },
        "additionalProperties": False,
    },
)

FETCH_URL_SPEC = ToolSpec(
    name="fetch_url",
    description=(
        "HTTP GET an http(s) URL (following up to 5 redirects) and return the response "
        "body with its content type. Large responses are rejected."
    ),
    parameters={
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "Absolute http:// or https:// URL."},
        },
        "required": ["url"],
        "additionalProperties": False,
    },
)


# Tools the agent loop itself runs (not an activity): never served by a device.
WORKFLOW_TOOLS = frozenset({"delegate"})

DELEGATE_SPEC = ToolSpec(
    name="delegate",
    description=(
        "Hand a self-contained sub-task to a sub-agent with its own session. You receive its "
        "final summary and references to the artifacts it produced."
    ),
    parameters={
        "type": "object",
        "properties": {
            "task": {"type": "string", "description": "What the sub-agent should do."},
            "agent": {"type": "string", "description": "A short name for the sub-agent."},
        },
        "required": ["task"],
        "additionalProperties": False,
    },
)


async def _delegate_runs_in_the_workflow(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
    # The loop starts a child workflow for `delegate`; an activity can't, so never runs it.
    raise ToolError("NotRunnable", "delegate is run by the agent loop, not as an activity")


def builtin_tools(read_cap_bytes: int = DEFAULT_READ_CAP_BYTES) -> list[Tool]:
    """Return the built-in tools with their approval policy and effect.

    Only write_file changes the workspace, so only it needs approval. It is effectful and
    reconciled from the workspace; the memory tools that write (remember, forget) are
    idempotent under the call's key; the rest only read.
    """
    return [
        Tool(
            spec=READ_FILE_SPEC,
            fn=make_read_file(read_cap_bytes),
            effect="read_only",
            default_location="cloud",
        ),
        Tool(
            spec=WRITE_FILE_SPEC,
            fn=write_file,
            needs_approval=True,
            effect="effectful",
            reconcile=reconcile_write_file,
            side_effects=True,
            default_location="cloud",
        ),
        Tool(spec=LIST_DIR_SPEC, fn=list_dir, effect="read_only", default_location="cloud"),
        # A GET: it reads the web (what it reads may change, but it changes nothing).
        Tool(spec=FETCH_URL_SPEC, fn=fetch_url, effect="read_only", default_location="cloud"),
        *memory_tools(),
        # Run by the loop as a child workflow under its own keys, never by run_tool.
        Tool(
            spec=DELEGATE_SPEC,
            fn=_delegate_runs_in_the_workflow,
            effect="idempotent",
            default_location="cloud",
        ),
    ]


def default_registry() -> ToolRegistry:
    """Return a registry holding the built-in tools with default limits."""
    return ToolRegistry.of(builtin_tools())
