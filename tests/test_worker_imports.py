"""What a worker process loads: `agentctl worker` and the bench's worker import the cloud
worker's modules, and each SDK they load stays in every worker process's memory. The MCP
SDK, Alembic and FastAPI are loaded only by what uses them (a task on a device with MCP
servers, a migration, the gateway); measured at import, they were 19 of the bench worker's
133 MiB and 27 of `agentctl worker`'s 141 MiB."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Loaded only by the code that needs them.
DEFERRED = ("mcp", "alembic", "fastapi", "uvicorn", "starlette")


def _loaded(code: str) -> list[str]:
    probe = (
        "import json, sys\n"
        f"{code}\n"
        f"print(json.dumps(sorted(m for m in {list(DEFERRED)!r} if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_cloud_worker_and_its_command_line_load_no_deferred_sdk() -> None:
    loaded = _loaded(
        "import asyncio, durable_agents.workers.cli.main, durable_agents.workers.process.run\n"
        "import durable_agents.workers.process.cloud\n"
        "from durable_agents.activities.tools.mcp_toolset import McpToolsets\n"
        "asyncio.run(McpToolsets([]).start())  # a worker that serves no MCP server"
    )
    assert loaded == []


@pytest.mark.parametrize(
    ("code", "module"),
    [
        ("from durable_agents.workers.gateway.app import create_app", "fastapi"),
        (
            "from durable_agents.activities.tools.mcp_servers import McpStdio\n"
            "from durable_agents.activities.tools.mcp_toolset import McpToolsets\n"
            "McpToolsets([McpStdio('srv', 'mcp-server')])",
            "mcp",
        ),
        ("from durable_agents.activities.tools.mcp_device import device_mcp_tools", "mcp"),
        (
            "from durable_agents.storage.db import _alembic_config\n_alembic_config('postgresql://h/db')",
            "alembic",
        ),
    ],
)
def test_what_needs_a_deferred_sdk_still_loads_it(code: str, module: str) -> None:
    """The probe above would pass with no SDK installed at all: these show it sees them."""
    assert module in _loaded(code)
