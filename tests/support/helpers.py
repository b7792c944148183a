"""Shared test helpers: start a task, decide approvals, read what was committed."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import shutil
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import zstandard
from sqlalchemy import func, select, update
from temporalio.client import Client, WorkflowHandle, WorkflowHistory

from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.artifacts import artifact_key
from durable_agents.storage.device_models import DeviceRow
from durable_agents.storage.models import ArtifactRow, ItemRow, SessionRow
from durable_agents.storage.workspaces import TENANT_DIR
from durable_agents.workers.cli.main import main
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from durable_agents.workflows.agent import AgentWorkflow
from tests.support import verbs

DEMO_WORKSPACE = Path(__file__).resolve().parents[2] / "workers" / "demo" / "workspace"


def copy_demo_workspace(target: Path) -> Path:
    shutil.copytree(DEMO_WORKSPACE, target, dirs_exist_ok=True)
    return target


async def agentctl(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run `agentctl ARGS` in-process (off the event loop); (exit code, stdout, stderr)."""
    code = await asyncio.to_thread(main, list(args))
    out, err = capsys.readouterr()
    return code, out, err


async def start(
    client: Client,
    res: Resources,
    queue: str,
    text: str = "Survey the workspace.",
    *,
    tenant: str = "default",
    session_id: uuid.UUID | None = None,
    **options: Any,
) -> tuple[str, WorkflowHandle[AgentWorkflow, Any]]:
    opts = tasks.TaskOptions(tenant_id=tenant, task_queue=queue, **options)
    handle = await tasks.start_task(client, res.sessions, text, opts, session_id=session_id)
    return handle.id.removeprefix("agent-"), handle


def session_root(base: Path, tenant: str, session_id: uuid.UUID | str) -> Path:
    """The workspace a cloud worker with workspace base `base` gives a session (made here,
    so a test can put files in it before the task starts)."""
    root = base / tenant / str(session_id)
    root.mkdir(parents=True, exist_ok=True)
    return root


def files_to_read(base: Path, tenant: str, count: int) -> tuple[uuid.UUID, list[dict[str, Any]]]:
    """A new session's id, its workspace holding f0.txt .. f{count-1}.txt (300 words
    each), and a model script reading one per turn: a session long enough to compact with
    a small budget."""
    sid = uuid.uuid4()
    for n in range(count):
        (session_root(base, tenant, sid) / f"f{n}.txt").write_text(f"file {n} " * 300)
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": f"f{n}.txt"}}]}
        for n in range(count)
    ]
    return sid, script


def tenant_root(base: Path, tenant: str) -> Path:
    """The workspace every session of `tenant` shares under AGENT_WORKSPACE_SCOPE=tenant."""
    root = base / tenant / TENANT_DIR
    root.mkdir(parents=True, exist_ok=True)
    return root


async def approve_all(
    client: Client, res: Resources, session_id: str, stop: asyncio.Event, tenant: str = "default"
) -> list[str]:
    """Approve every pending call as it appears, until `stop` is set."""
    approved: list[str] = []
    while not stop.is_set():
        live = await tasks.live_status(client, session_id)
        for p in live.pending_approvals:
            if p.tool_call_id not in approved:
                await verbs.approve(
                    client,
                    session_id,
                    p.tool_call_id,
                    "test",
                    sessions=res.sessions,
                    tenant_id=tenant,
                )
                approved.append(p.tool_call_id)
        await asyncio.sleep(0.05)
    return approved


async def run_approving(
    client: Client,
    res: Resources,
    session_id: str,
    handle: WorkflowHandle[AgentWorkflow, Any],
    tenant: str = "default",
    *,
    within_seconds: float = 60,
) -> tuple[Any, list[str]]:
    """Wait for the task's result, approving every call that asks; returns (result, approved)."""
    stop = asyncio.Event()
    approver = asyncio.create_task(approve_all(client, res, session_id, stop, tenant))
    try:
        result = await asyncio.wait_for(handle.result(), within_seconds)
    finally:
        stop.set()
    return result, await approver


async def wait_for_pending(
    client: Client, session_id: str, within_seconds: float = 20
) -> list[str]:
    async with asyncio.timeout(within_seconds):
        while True:
            live = await tasks.live_status(client, session_id)
            if live.pending_approvals:
                return [p.tool_call_id for p in live.pending_approvals]
            await asyncio.sleep(0.05)


async def wait_until_recorded(handle: WorkflowHandle[Any, Any], within_seconds: float = 20) -> None:
    """Until the run has no workflow task open. A status query answers from the worker's
    memory between activations, so it can show a pending approval while the task that asked
    for it still waits on its local status write; a worker stopped then leaves that task to
    the next worker, which sees an approval sent meanwhile before the call it approves."""
    async with asyncio.timeout(within_seconds):
        while True:
            described = await handle.describe()
            if not described.raw_description.HasField("pending_workflow_task"):
                return
            await asyncio.sleep(0.05)


async def items_of(res: Resources, tenant: str, session_id: str) -> list[ItemRow]:
    _, items = await tasks.read_session(res.sessions, tenant, session_id)
    return items


async def status_of(res: Resources, tenant: str, session_id: str) -> str | None:
    """The session's status in AgentState; None before a session is recorded (a plain
    start's workflow records its own)."""
    async with agent_state(res.sessions, tenant) as st:
        row = await st.sessions.find(uuid.UUID(session_id))
    return None if row is None else row.status


async def artifact_count(res: Resources, tenant: str, sha256: str | None = None) -> int:
    async with res.sessions() as db:
        stmt = select(func.count()).select_from(ArtifactRow).where(ArtifactRow.tenant_id == tenant)
        if sha256:
            stmt = stmt.where(ArtifactRow.sha256 == sha256)
        return int(await db.scalar(stmt) or 0)


async def s3_keys(res: Resources, prefix: str) -> list[str]:
    s3: Any = res.store.client  # the test reads the bucket as any other S3 client would
    keys: list[str] = []
    paginator = s3.get_paginator("list_objects_v2")
    async for page in paginator.paginate(Bucket=res.store.bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys


def stored_key(res: Resources, item: ItemRow) -> str:
    """The store key of an item's artifact: derived from its tenant and sha256 (tool results
    no longer repeat it in their data)."""
    return artifact_key(res.store.prefix, item.tenant_id, item.data["artifact"]["sha256"])


async def s3_sha256(res: Resources, key: str) -> str:
    """The sha256 of the object's bytes as an HTTP client reads them: a body stored with
    Content-Encoding: zstd is decoded first, as such a client would."""
    s3: Any = res.store.client
    obj = await s3.get_object(Bucket=res.store.bucket, Key=key)
    async with obj["Body"] as body:
        data = await body.read()
    if obj.get("ContentEncoding") == "zstd":
        reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
        data = reader.read()
    return hashlib.sha256(data).hexdigest()


async def register_device(
    res: Resources, tenant: str, device_id: str, tools: list[str], *, seen_ago_s: float = 0
) -> None:
    """Register a device as its worker would; `seen_ago_s` backdates its last heartbeat."""
    async with agent_state(res.sessions, tenant, write=True) as st:
        await st.devices.register(device_id, tools)
        if seen_ago_s:
            await st.db.execute(
                update(DeviceRow)
                .where(DeviceRow.tenant_id == tenant, DeviceRow.device_id == device_id)
                .values(last_seen_at=func.now() - timedelta(seconds=seen_ago_s))
            )


def new_session_id() -> uuid.UUID:
    return uuid.uuid4()


def decoded_payloads(history: WorkflowHistory) -> str:
    """Every payload in a history, decoded: what a reader of the history could see."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "data" and isinstance(value, str):
                    found.append(base64.b64decode(value).decode("utf-8", "replace"))
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(history.to_json()))
    return "\n".join(found)


async def committed_rows(res: Resources, tenant: str) -> dict[str, int]:
    """How many sessions, items and artifacts the tenant has: all zero means a refused
    request committed nothing."""
    counts: dict[str, int] = {}
    async with res.sessions() as db:
        tables = (("sessions", SessionRow), ("items", ItemRow), ("artifacts", ArtifactRow))
        for name, model in tables:
            stmt = select(func.count()).select_from(model).where(model.tenant_id == tenant)
            counts[name] = int(await db.scalar(stmt) or 0)
    return counts


async def session_count(res: Resources, tenant: str) -> int:
    """How many sessions the tenant has."""
    return (await committed_rows(res, tenant))["sessions"]
