"""A tool subprocess cannot touch the embedded stack's services (issue 39, item 7; DESIGN.md
invariant 13): as root, PostgreSQL and SeaweedFS run as role users of their own
(workers/stack/roles.py) and a stdio MCP server runs as the tool user (AGENT_TOOL_USER,
default nobody), which is neither.

A hostile server (tests/mcp_servers/raider.py), spawned by McpToolsets as a worker spawns
it, goes after a running stack: it reads PostgreSQL's and SeaweedFS's data files for another
tenant's row and object, and temporal.db; rewrites pg_hba.conf to `trust` and opens
postgresql.conf for writing; SIGHUPs the postmaster and signals weed and Temporal; then logs
in as the `postgres` superuser without a password, over the unix socket and over TCP. Each
step is refused, with the state dir world-searchable (`make run`, the suite's stacks: the
services run as their users) and private (pytest's 0700 dirs: PostgreSQL in a user
namespace, keeping root's uid on disk).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durable_agents.activities.tools.base import ToolContext
from durable_agents.activities.tools.mcp_servers import McpStdio
from durable_agents.activities.tools.mcp_toolset import McpToolsets
from durable_agents.workers.stack import DevStack
from durable_agents.workers.stack._pginstall import world_searchable
from durable_agents.workers.stack.pg_auth import HBA_CONF

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="only a root stack runs its services and tools as users of their own; as a "
    "regular user all run as that user (workers/stack/roles.py)",
)

SERVERS = Path(__file__).resolve().parent / "mcp_servers"
MARKER = f"other-tenant-{uuid.uuid4().hex}"


def _uid_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    (uids,) = [line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")]
    return int(uids[0])


def _postmaster_pid(stack: DevStack) -> int:
    return int((stack.postgres.data_dir / "postmaster.pid").read_text().split()[0])


@pytest.fixture(scope="module", params=["world-searchable", "private"])
def raided(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DevStack]:
    """A running stack holding MARKER in a row of PostgreSQL and in an S3 object."""
    if request.param == "world-searchable":
        state = Path(tempfile.mkdtemp(prefix="durable-agents-raided-"))
        state.chmod(0o755)
    else:
        state = tmp_path_factory.mktemp("raided")  # under pytest's 0700 directory
    stack = DevStack(state, temporal_port=0, postgres_port=0, s3_port=0, fsync=False)
    try:
        stack.start()
        stack.postgres.psql("CREATE TABLE tenant_rows (body text)", "agent")
        stack.postgres.psql(f"INSERT INTO tenant_rows VALUES ('{MARKER}')", "agent")
        stack.postgres.psql("CHECKPOINT")
        s3 = stack.seaweed.client()
        s3.put_object(Bucket=stack.seaweed.bucket, Key="t-other/secret", Body=MARKER.encode())
        yield stack
    finally:
        stack.stop()
        if request.param == "world-searchable":
            shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
def raider(tmp_path: Path) -> Iterator[McpStdio]:
    """The raider, from a directory any user may enter, run by a python3 outside the
    virtualenv (which the tool user may not reach)."""
    python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 to run the raider with")
    where = Path(tempfile.mkdtemp(prefix="raider-", dir="/tmp"))
    try:
        where.chmod(0o755)
        for name in ("hostile.py", "raider.py"):
            shutil.copyfile(SERVERS / name, where / name)
            (where / name).chmod(0o644)
        yield McpStdio("raider", python, (str(where / "raider.py"),), cwd=str(where))
    finally:
        shutil.rmtree(where, ignore_errors=True)


async def _raid(server: McpStdio, stack: DevStack) -> dict[str, Any]:
    """What the raider got, through the tool a model's call runs, spawned as a worker whose
    AGENT_TOOL_USER is unset spawns it."""
    arguments = {
        "marker": MARKER,
        "pg_data": str(stack.postgres.data_dir),
        "pg_port": stack.postgres.port,
        "pg_pid": _postmaster_pid(stack),
        "s3_data": str(stack.seaweed.data_dir),
        "s3_pid": stack.seaweed.pid,
        "temporal_db": str(stack.temporal.db_file),
        "temporal_pid": stack.temporal.pid,
    }
    async with McpToolsets([server], tool_user=None) as toolsets:
        (tool,) = toolsets.tools()
        ctx = ToolContext("raid-0", Path("/"), "t-raider", "s-raider")
        output = await tool.fn(ctx, arguments)
    report: dict[str, Any] = json.loads(output.content)
    return report


async def test_a_tool_subprocess_can_neither_read_rewrite_signal_nor_log_in_to_the_services(
    raided: DevStack, raider: McpStdio
) -> None:
    report = await _raid(raider, raided)

    service_uids = {_uid_of(_postmaster_pid(raided)), _uid_of(raided.seaweed.pid or 0), 0}
    assert report["uid"] not in service_uids
    nothing = {"files_read": 0, "marker_found": False, "errors": ["PermissionError"]}
    assert report["pg_files"] == nothing, "the tool read PostgreSQL's data files"
    assert report["s3_files"] == nothing, "the tool read SeaweedFS's data files"
    assert report["temporal_db"] == "PermissionError"
    assert report["pg_hba"] == "PermissionError"
    assert report["postgresql_conf"] == "PermissionError"
    for process in ("signal_postmaster", "signal_s3", "signal_temporal"):
        assert report[process] == "PermissionError", process
    # The socket's directory is closed to it; over TCP the server asks for a password.
    assert report["login"] == {"socket": "PermissionError", "tcp": "password asked"}
    assert (raided.postgres.data_dir / "pg_hba.conf").read_text() == HBA_CONF


def test_postgres_and_s3_run_as_users_of_their_own_behind_private_dirs(
    raided: DevStack,
) -> None:
    postgres, s3 = _uid_of(_postmaster_pid(raided)), _uid_of(raided.seaweed.pid or 0)
    if world_searchable(raided.state_dir):
        assert postgres != 0 and s3 != 0 and postgres != s3
    else:
        # Where their users cannot enter: root's uid in a user namespace, no capability.
        assert postgres == s3 == 0
    for data in (raided.postgres.data_dir, raided.seaweed.data_dir):
        assert data.stat().st_mode & 0o077 == 0, f"{data} is open to other users"
