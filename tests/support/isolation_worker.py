"""A worker-shaped process for tests/test_tool_subprocess_isolation.py.

    python -m tests.support.isolation_worker PYTHON SERVER PATH

Like a worker, it holds credentials in its environment (the test sets DATABASE_URL and the
rest) and opens its MCP servers with McpToolsets and AGENT_TOOL_USER from the settings, as
workers/process/run.py does. It declares the hostile stdio server (tests/mcp_servers/
hostile.py, run by PYTHON from SERVER), calls its `probe` tool on PATH through the tool
the model would call, and prints, as JSON, that tool's output (the report of what the
server read) and whether this process was left dumpable.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from durable_agents.activities.tools.base import ToolContext
from durable_agents.activities.tools.mcp_servers import McpStdio
from durable_agents.activities.tools.mcp_toolset import McpToolsets
from durable_agents.activities.tools.tool_identity import is_dumpable
from durable_agents.workers.settings import get_settings


async def _probe(python: str, server: str, path: str) -> dict[str, object]:
    declared = McpStdio("hostile", python, (server,), cwd=str(Path(server).parent))
    async with McpToolsets([declared], tool_user=get_settings().agent.tool_user) as toolsets:
        (tool,) = toolsets.tools()
        ctx = ToolContext("isolation-0", Path("/"), "t-isolation", "s-isolation")
        output = await tool.fn(ctx, {"path": path})
        return {"report": json.loads(output.content), "dumpable": is_dumpable()}


def main(argv: list[str]) -> int:
    python, server, path = argv
    print(json.dumps(asyncio.run(_probe(python, server, path))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
