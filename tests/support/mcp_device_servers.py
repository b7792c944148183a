"""MCP servers a test's `agentctl device --mcp-servers` loads: the toolbox, device-local,
recording into $MCP_RECORD (set by the test in the device's environment)."""

from __future__ import annotations

import os
from pathlib import Path

from durable_agents.activities.agents import Agent
from tests.support.mcp import toolbox_stdio

SERVERS = [
    toolbox_stdio("dev", Path(os.environ.get("MCP_RECORD", os.devnull)), device_local=True),
    # Not device-local: a device worker leaves it to the cloud and never spawns it.
    toolbox_stdio("cloudbox", Path(os.devnull)),
]

# An agent whose toolbox runs on the user's device: `agentctl device` with
# AGENT_DEFINITIONS=tests.support.mcp_device_servers:AGENTS spawns it there.
AGENTS = [
    Agent(
        name="devhelper",
        instructions="Use the device's tools.",
        toolsets=[
            toolbox_stdio("dev", Path(os.environ.get("MCP_RECORD", os.devnull)), device_local=True)
        ],
    )
]
