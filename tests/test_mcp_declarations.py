"""MCP server declarations named on a command line (`agentctl device --mcp-servers`)."""

from __future__ import annotations

import pytest

from durable_agents.workers.process.mcp_declarations import load_servers
from tests.support.helpers import agentctl
from tests.support.mcp_device_servers import SERVERS

BAD_TARGETS = [
    ("no-colon", "is not MODULE:ATTR"),
    ("tests.support.nothing_here:SERVERS", "cannot import"),
    ("tests.support.mcp:REPO", "is not a list"),
    ("tests.support.mcp:SERVER_MODULE", "is not a list"),
    ("tests.test_mcp_declarations:BAD_TARGETS", "holds a tuple, not McpStdio or McpHttp"),
]


def test_declarations_load_from_module_and_attribute() -> None:
    assert load_servers("tests.support.mcp_device_servers:SERVERS") == SERVERS


@pytest.mark.parametrize(("target", "why"), BAD_TARGETS)
def test_a_bad_target_is_refused_saying_why(target: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        load_servers(target)


async def test_agentctl_device_refuses_a_bad_target_before_connecting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = await agentctl(
        capsys, "device", "--device-id", "laptop", "--mcp-servers", "no-colon"
    )
    assert code == 1
    assert err.strip() == "error: 'no-colon' is not MODULE:ATTR (e.g. myapp.agents:MCP_SERVERS)"
