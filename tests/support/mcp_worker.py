"""A real cloud worker process serving MCP tools, so a test can SIGKILL it mid-call.

    MCP_HTTP_SERVERS='{"web": "http://127.0.0.1:PORT/mcp"}' python -m tests.support.mcp_worker

Configured like `agentctl worker` (settings from the environment), plus the MCP servers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os

from durable_agents.activities.tools.mcp_servers import McpHttp
from durable_agents.workers.process.run import run_cloud_worker
from durable_agents.workers.settings import get_settings


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    servers = json.loads(os.environ["MCP_HTTP_SERVERS"])
    declared = [McpHttp(name, url) for name, url in servers.items()]
    asyncio.run(run_cloud_worker(get_settings(), mcp_servers=declared))


if __name__ == "__main__":
    main()
