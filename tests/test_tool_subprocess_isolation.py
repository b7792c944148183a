"""A tool's subprocess cannot read the worker's credentials (issue 29, finding 3).

A hostile stdio MCP server (tests/mcp_servers/hostile.py) tries /proc/<ppid>/environ,
/proc/<ppid>/mem and a file of the worker's (0600) and reports what it read as its tool
result. The worker is tests/support/isolation_worker.py: credentials in its environment,
its MCP servers opened as workers/process/run.py opens them, the tool called as a model's
call runs it. activities/tools/tool_identity.py says what holds for which worker.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durable_agents.activities.tools.mcp_servers import McpStdio
from durable_agents.activities.tools.mcp_toolset import McpToolsets
from durable_agents.activities.tools.tool_identity import (
    DEFAULT_TOOL_USER,
    SERVICE_USERS,
    ToolIdentityError,
    tool_identity,
)

REPO = Path(__file__).resolve().parents[1]
HOSTILE = REPO / "tests" / "mcp_servers" / "hostile.py"
ROOT = os.geteuid() == 0
# What a worker's environment holds, each with a marker no other text contains.
SECRETS = {
    "DATABASE_URL": "postgresql+asyncpg://agent:pw-db-4f1c@127.0.0.1:1/agent",
    "DATABASE_MIGRATION_URL": "postgresql+asyncpg://agent_owner:pw-owner-9a2e@127.0.0.1:1/a",
    "S3_SECRET_ACCESS_KEY": "s3-secret-77d0",
    "MODEL_API_KEY": "sk-model-3b5e",
}
MARKERS = ("pw-db-4f1c", "pw-owner-9a2e", "s3-secret-77d0", "sk-model-3b5e")
FILE_MARKER = "worker-file-secret-c21a"


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A directory any user may enter, holding the hostile server, and the worker's own
    file, 0600: only its mode, not a directory on the way, keeps other users out."""
    where = Path(tempfile.mkdtemp(prefix="tool-isolation-", dir="/tmp"))
    try:
        where.chmod(0o755)
        server = where / "hostile.py"
        shutil.copyfile(HOSTILE, server)
        server.chmod(0o644)
        secret = where / "worker.env"
        secret.write_text(FILE_MARKER)
        secret.chmod(stat.S_IRUSR | stat.S_IWUSR)
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _system_python() -> str:
    """A python3 outside the virtualenv, which may sit where only root can reach it."""
    found = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    if found is None:
        pytest.skip("no system python3 to run the hostile server with")
    return found


def _run_worker(where: Path, prefix: list[str]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "AGENT_TOOL_USER"}
    env.update(SECRETS, PYTHONPATH=str(REPO))
    argv = [*prefix, sys.executable, "-m", "tests.support.isolation_worker"]
    argv += [_system_python(), str(where / "hostile.py"), str(where / "worker.env")]
    done = subprocess.run(
        argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _denied(probe: dict[str, Any]) -> bool:
    return set(probe) == {"error"}


@pytest.mark.skipif(not ROOT, reason="the worker runs as root only when the tests do")
def test_a_stdio_server_of_a_root_worker_reads_nothing_of_the_worker(reachable: Path) -> None:
    result = _run_worker(reachable, [])
    report = result["report"]
    assert report["uid"] not in (0, os.geteuid())
    assert report["groups"] == []  # no supplementary group, root's or any
    assert _denied(report["environ"]), report["environ"]
    assert _denied(report["mem"]), report["mem"]
    assert _denied(report["file"]), "the server read the worker's 0600 file"
    text = json.dumps(report)
    assert not [m for m in (*MARKERS, FILE_MARKER) if m in text]
    assert result["dumpable"] is False


def _as_regular_user() -> list[str]:
    """How to run the worker as a regular user: as it is, or, as root, in a user namespace
    where it is `nobody` (it keeps root's uid on disk, but holds no capability: what the
    kernel checks for /proc is then exactly a regular user's case)."""
    if not ROOT:
        return []
    prefix = ["unshare", "--user", "--map-user=65534", "--map-group=65534", "--"]
    if subprocess.run([*prefix, "true"], capture_output=True, check=False).returncode != 0:
        pytest.skip("user namespaces are unavailable here")
    return prefix


def test_a_stdio_server_of_a_regular_users_worker_reads_neither_its_environ_nor_memory(
    reachable: Path,
) -> None:
    result = _run_worker(reachable, _as_regular_user())
    report = result["report"]
    assert _denied(report["environ"]), "the server read the worker's /proc/<pid>/environ"
    assert _denied(report["mem"]), report["mem"]
    assert not [m for m in MARKERS if m in json.dumps(report)]
    assert result["dumpable"] is False
    # What one user cannot keep from another process of its own: its files. Shown so
    # that the limit stays stated (tool_identity.py); AGENT_TOOL_USER as root closes it.
    assert report["file"] == {"read": FILE_MARKER}


@pytest.mark.skipif(not ROOT, reason="another user is chosen only for a root worker")
async def test_a_server_the_tool_user_cannot_reach_is_refused_naming_it(tmp_path: Path) -> None:
    # tmp_path is under a 0700 directory, as a clone in /root and its .venv would be.
    private = tmp_path / "server"
    private.write_text("#!/bin/sh\nexit 0\n")
    private.chmod(0o755)
    toolsets = McpToolsets([McpStdio("private", str(private))])
    with pytest.raises(ToolIdentityError) as refused:
        await toolsets.start()
    message = str(refused.value)
    assert "'private'" in message and f"{DEFAULT_TOOL_USER!r}" in message
    assert str(private) in message and "AGENT_TOOL_USER" in message


def test_the_user_to_run_tools_as_must_exist() -> None:
    with pytest.raises(ToolIdentityError, match="no user named 'no-such-user-7e1'"):
        tool_identity("no-such-user-7e1", "MCP server 'x'")


@pytest.mark.parametrize("user", SERVICE_USERS)
def test_a_tool_never_runs_as_a_user_the_dev_stack_runs_a_service_as(user: str) -> None:
    with pytest.raises(ToolIdentityError, match=f"{user!r} is a user the dev stack runs"):
        tool_identity(user, "MCP server 'x'")


@pytest.mark.skipif(not ROOT, reason="only root may run tools as another user")
def test_a_root_worker_runs_tools_as_nobody_unless_told_otherwise() -> None:
    run_as = tool_identity(None, "MCP server 'x'")
    assert run_as is not None and run_as.user == DEFAULT_TOOL_USER and run_as.uid != 0
    # Named explicitly, the worker's own user is the operator's choice (and logged).
    assert tool_identity("root", "MCP server 'x'") is None


def test_the_prefork_supervisor_holds_no_credentials(tmp_path: Path) -> None:
    """`agentctl worker --processes N`: the parent execs a supervisor, which exec makes
    dumpable again; it passes signals on, so it is given no credential to show."""
    pid_file = tmp_path / "supervisor"
    code = (
        "import os, time\nfrom pathlib import Path\n"
        "from durable_agents.workers.process.prefork import run_forked\n"
        "def serve(i):\n"
        f"    Path({str(pid_file)!r}).write_text(str(os.getppid()))\n"
        "    time.sleep(60)\n"
        "run_forked(1, serve)\n"
    )
    env = {**os.environ, **SECRETS, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + 30
        cmdline = b""
        # The script's file name: the test's own tmp path (in the -c code before the exec)
        # holds "prefork_supervisor" too.
        while b"prefork_supervisor.py" not in cmdline and time.monotonic() < deadline:
            time.sleep(0.05)
            if pid_file.exists():
                cmdline = Path(f"/proc/{pid_file.read_text()}/cmdline").read_bytes()
        assert b"prefork_supervisor.py" in cmdline, "the supervisor did not start"
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes().decode(errors="replace")
        assert "PATH=" in environ  # read: it is there, without the credentials
        assert [m for m in MARKERS if m in environ] == []
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
