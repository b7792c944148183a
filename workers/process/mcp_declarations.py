"""Loading MCP server declarations named on a command line (`MODULE:ATTR`)."""

from __future__ import annotations

import importlib

from durable_agents.activities.tools.mcp_servers import McpHttp, McpServer, McpStdio, check_unique


def load_servers(target: str) -> list[McpServer]:
    """The McpStdio/McpHttp declarations at `MODULE:ATTR` (a list or tuple of them)."""
    module_name, sep, attr = target.partition(":")
    if not (module_name and sep and attr):
        raise ValueError(f"{target!r} is not MODULE:ATTR (e.g. myapp.agents:MCP_SERVERS)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"cannot import {module_name!r} for MCP servers: {err}") from None
    value = getattr(module, attr, None)
    if not isinstance(value, list | tuple):
        raise ValueError(f"{target} is not a list of MCP server declarations")
    servers: list[McpServer] = []
    for item in value:
        if not isinstance(item, McpStdio | McpHttp):
            raise ValueError(f"{target} holds a {type(item).__name__}, not McpStdio or McpHttp")
        servers.append(item)
    check_unique(servers)
    return servers
