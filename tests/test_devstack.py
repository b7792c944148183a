"""The embedded dev stack: real Temporal, PostgreSQL and SeaweedFS on free loopback ports."""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from sqlalchemy.engine import make_url
from temporalio.client import Client, WorkflowExecutionStatus

from durable_agents.workers.dev_env import STACK_VARIABLES
from durable_agents.workers.settings import S3Settings
from durable_agents.workers.stack import (
    DEFAULT_BUCKET,
    DevStack,
    PortInUseError,
    PostgresServer,
    StackEndpoints,
    TemporalDevServer,
)
from tests.support.processes import as_in_a_terminal

AGENTCTL = Path(sys.executable).parent / "agentctl"


@pytest.fixture(scope="module")
def state_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # pytest's own 0700 tmp dirs: as root, postgres must still be able to run there.
    return tmp_path_factory.mktemp("devstack")


@pytest.fixture(scope="module")
def devstack(state_root: Path) -> Iterator[DevStack]:
    stack = DevStack(state_root / "one", temporal_port=0, postgres_port=0, s3_port=0, fsync=False)
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()
        # Drop SDK clients before interpreter exit, where their teardown can crash.
        gc.collect()


@pytest.fixture(scope="module")
def endpoints(devstack: DevStack) -> StackEndpoints:
    return devstack.endpoints


def s3_client(ep: StackEndpoints, secret_key: str | None = None) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=ep.s3_endpoint_url,
        aws_access_key_id=ep.s3_access_key_id,
        aws_secret_access_key=secret_key or ep.s3_secret_access_key,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}),
    )


def error_code(exc: ClientError) -> str:
    return str(exc.response["Error"]["Code"])


def asyncpg_dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


def test_endpoints_env(devstack: DevStack, endpoints: StackEndpoints) -> None:
    env = endpoints.env()
    # What a process elsewhere takes from the env file: all of it, and nothing else.
    assert set(env) == set(STACK_VARIABLES)
    assert {"TEMPORAL_ADDRESS", "DATABASE_URL", "S3_ENDPOINT_URL"} <= set(env)
    assert env["TEMPORAL_NAMESPACE"] == "default"
    pg = devstack.postgres
    for key, role in (("DATABASE_URL", "agent"), ("DATABASE_MIGRATION_URL", "agent_owner")):
        url = make_url(env[key])
        assert (url.drivername, url.username, url.host) == ("postgresql+asyncpg", role, "127.0.0.1")
        assert url.password == pg.password(role)
    # The superuser's password is handed to no one.
    assert not [k for k, v in env.items() if pg.password("postgres") in v]
    assert pg.password("postgres") not in repr(endpoints)
    assert pg.password("agent") not in repr(endpoints)
    assert DEFAULT_BUCKET == S3Settings.model_fields["bucket"].default == env["S3_BUCKET"]
    assert endpoints.temporal_ui_url is None


def test_state_dir_layout(devstack: DevStack) -> None:
    names = {p.name for p in devstack.state_dir.iterdir()}
    assert {"postgres", "s3", "temporal.db", "logs"} <= names
    logs = {p.name for p in (devstack.state_dir / "logs").iterdir()}
    assert logs == {"postgres.log", "seaweed.log", "temporal.log"}


async def test_postgres_accepts_agent(endpoints: StackEndpoints) -> None:
    conn = await asyncpg.connect(asyncpg_dsn(endpoints.database_url))
    try:
        assert await conn.fetchval("select 1") == 1
        assert await conn.fetchval("select current_user") == "agent"
    finally:
        await conn.close()


async def test_postgres_create_database(devstack: DevStack) -> None:
    devstack.postgres.create_database("devstack_isolated")
    owner_url = devstack.postgres.url_for("devstack_isolated", role=devstack.postgres.owner)
    conn = await asyncpg.connect(asyncpg_dsn(owner_url))
    try:
        await conn.execute("create table t (x int)")
        assert await conn.fetchval("select current_database()") == "devstack_isolated"
    finally:
        await conn.close()
    # Created again: fresh, so the table is gone.
    conn = await asyncpg.connect(
        asyncpg_dsn(devstack.postgres.create_database("devstack_isolated"))
    )
    try:
        assert await conn.fetchval("select to_regclass('t')") is None
    finally:
        await conn.close()


def test_s3_rejects_wrong_secret(endpoints: StackEndpoints) -> None:
    with pytest.raises(ClientError) as info:
        s3_client(endpoints, secret_key="not-the-secret").list_buckets()
    assert error_code(info.value) == "SignatureDoesNotMatch"


def test_s3_rejects_wrong_checksum(endpoints: StackEndpoints) -> None:
    wrong = base64.b64encode(b"\0" * 32).decode()
    with pytest.raises(ClientError) as info:
        s3_client(endpoints).put_object(
            Bucket=endpoints.s3_bucket, Key="digest", Body=b"hello", ChecksumSHA256=wrong
        )
    assert error_code(info.value) == "BadDigest"


def test_s3_if_none_match(endpoints: StackEndpoints) -> None:
    s3 = s3_client(endpoints)
    key = f"once-{uuid.uuid4().hex}"
    s3.put_object(Bucket=endpoints.s3_bucket, Key=key, Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as info:
        s3.put_object(Bucket=endpoints.s3_bucket, Key=key, Body=b"second", IfNoneMatch="*")
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert error_code(info.value) == "PreconditionFailed"
    assert s3.get_object(Bucket=endpoints.s3_bucket, Key=key)["Body"].read() == b"first"


async def test_temporal_client_connects(endpoints: StackEndpoints) -> None:
    client = await Client.connect(endpoints.temporal_address, namespace="default")
    assert await client.service_client.check_health()


def _cmdline(pid: int) -> list[bytes]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")


@pytest.mark.parametrize("fsync", [True, False])
async def test_temporal_restart_keeps_workflows(state_root: Path, fsync: bool) -> None:
    """Stopped, or without fsync (tests, benchmarks, the demo) even SIGKILLed, the server
    comes back with its workflows: only an OS crash could lose what synchronous=OFF left in
    the page cache. Either way SQLite writes through its write-ahead log."""
    db = state_root / f"restart-{fsync}" / "temporal.db"
    server = TemporalDevServer(db, port=0, fsync=fsync)
    workflow_id = f"survives-restart-{uuid.uuid4().hex}"
    try:
        server.start()
        assert server.pid is not None
        assert (b"synchronous=OFF" in _cmdline(server.pid)) is not fsync
        client = await Client.connect(server.address)
        # Nobody polls this queue, so the workflow just stays open.
        await client.start_workflow(
            "NotRegisteredAnywhere", id=workflow_id, task_queue="devstack-nobody-polls"
        )
        assert db.with_name("temporal.db-wal").exists(), "journal_mode=WAL did not apply"
        if not fsync:
            os.killpg(server.pid, signal.SIGKILL)
        server.stop()
        server.start()
        client = await Client.connect(server.address)
        described = await client.get_workflow_handle(workflow_id).describe()
        assert described.status == WorkflowExecutionStatus.RUNNING
    finally:
        server.stop()


def test_second_stack_alongside(endpoints: StackEndpoints) -> None:
    # Outside pytest's 0700 tmp dirs: the runuser (not user-namespace) path as root.
    root = Path(tempfile.mkdtemp(prefix="devstack-test-"))
    root.chmod(0o755)
    second = DevStack(root, temporal_port=0, postgres_port=0, s3_port=0, fsync=False)
    try:
        ep = second.start()
        assert ep.temporal_address != endpoints.temporal_address
        assert ep.database_url != endpoints.database_url
        assert ep.s3_endpoint_url != endpoints.s3_endpoint_url
        assert second.postgres.psql("select current_user", database="agent") == "postgres"
        s3 = s3_client(ep)
        s3.put_object(Bucket=ep.s3_bucket, Key="only-in-second", Body=b"x")
        with pytest.raises(ClientError):
            s3_client(endpoints).head_object(Bucket=endpoints.s3_bucket, Key="only-in-second")
    finally:
        second.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_postgres_port_in_use(state_root: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = PostgresServer(state_root / "busy" / "postgres", port=port)
        began = time.monotonic()
        with pytest.raises(PortInUseError, match=rf"postgres: port {port} .*in use"):
            server.start()
        assert time.monotonic() - began < 5


def test_stack_port_in_use_fails_before_launching(state_root: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        stack = DevStack(state_root / "busy-stack", temporal_port=0, postgres_port=0, s3_port=port)
        with pytest.raises(PortInUseError, match=rf"seaweedfs s3: port {port}"):
            stack.start()
    assert not (state_root / "busy-stack").exists()


def test_stack_stops_everything_after_failed_start(
    state_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = DevStack(state_root / "half", temporal_port=0, postgres_port=0, s3_port=0, fsync=False)

    def broken_start() -> None:
        raise RuntimeError("s3 failed on purpose")

    monkeypatch.setattr(stack.seaweed, "start", broken_start)
    with pytest.raises(RuntimeError, match="on purpose"):
        stack.start()
    assert not (stack.postgres.data_dir / "postmaster.pid").exists()
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", stack.temporal.port)) != 0


async def test_dev_up_serves_the_gateway_and_prints_its_url(state_root: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_", "S3_", "MODEL_", "TEMPORAL_"))
    }
    proc = await asyncio.create_subprocess_exec(
        str(AGENTCTL),
        "dev",
        "up",
        "--state-dir",
        str(state_root / "up"),
        *("--temporal-port", "0", "--postgres-port", "0", "--s3-port", "0", "--no-ui"),
        *("--model-provider", "offline", "--gateway-port", "0"),
        env=env,
        preexec_fn=as_in_a_terminal,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(120):
            while not (
                found := re.search(
                    r"gateway: (http://127\.0\.0\.1:\d+) ", lines[-1] if lines else ""
                )
            ):
                line = (await proc.stdout.readline()).decode()
                assert line, "".join(lines)
                lines.append(line)
            async with httpx.AsyncClient(base_url=found.group(1), timeout=10) as http:
                assert (await http.get("/healthz")).status_code == 200
                assert (await http.get("/v1/me")).status_code == 401  # keys, as in production
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C stops everything
        async with asyncio.timeout(60):
            rest, _ = await proc.communicate()
    text = "".join(lines) + rest.decode()
    assert "agentctl keys create --tenant default --user you --scope read --scope start" in text
    assert "AGENT_GATEWAY_URL=http://127.0.0.1:" in text
    assert not [p for p in _cmdlines() if str(state_root / "up") in p], "dev up left services"
    # The passwords are in two 0600 files (the env file for other terminals), never printed.
    passwords = json.loads((state_root / "up" / "postgres.passwords.json").read_text())
    assert not [role for role, password in passwords.items() if password in text]
    env_file = state_root / "up" / "env"
    assert f". {env_file}" in text
    assert env_file.stat().st_mode & 0o777 == 0o600
    assert f"export DATABASE_URL=postgresql+asyncpg://agent:{passwords['agent']}@" in (
        env_file.read_text()
    )


def _cmdlines() -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            found.append(cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return found
