"""The test MCP server (tests/mcp_servers/toolbox.py) over stdio and over HTTP, and what
it recorded of the calls it received."""

from __future__ import annotations

import json
import os
import pwd
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from durable_agents.activities.tools.mcp_servers import McpHttp, McpStdio

REPO = Path(__file__).resolve().parents[2]
SERVER_MODULE = "tests.mcp_servers.toolbox"
# The toolbox runs from the virtualenv, which a root worker's tool user (nobody) may not
# reach (a clone in a 0700 directory), so it runs as the tests' own user, as a declaration
# may choose; tests/test_tool_subprocess_isolation.py covers the default identity.
OWN_USER = pwd.getpwuid(os.geteuid()).pw_name


def toolbox_stdio(
    name: str, record: Path, env: dict[str, str] | None = None, **decl: Any
) -> McpStdio:
    """The toolbox as a stdio server the worker spawns, recording into `record`."""
    env = {"MCP_RECORD": str(record), "PYTHONPATH": str(REPO), **(env or {})}
    decl.setdefault("run_as", OWN_USER)
    return McpStdio(name, sys.executable, ("-m", SERVER_MODULE), env=env, **decl)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def toolbox_http(name: str, record: Path, log: Path, port: int | None = None) -> Iterator[McpHttp]:
    """The toolbox as a streamable-HTTP server in a process of its own on a loopback port
    (`port`, or a free one), for as long as the block runs."""
    port = port or free_port()
    env = {**os.environ, "MCP_RECORD": str(record), "PYTHONPATH": str(REPO)}
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", SERVER_MODULE, "http", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"MCP server exited:\n{log.read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield McpHttp(name, f"http://127.0.0.1:{port}/mcp")
    finally:
        proc.kill()
        proc.wait(10)


def recorded(record: Path, tool: str | None = None) -> list[dict[str, Any]]:
    """The calls the server received, in order (of `tool` only, if given)."""
    if not record.exists():
        return []
    calls = [json.loads(line) for line in record.read_text().splitlines() if line]
    return [c for c in calls if tool is None or c["tool"] == tool]
