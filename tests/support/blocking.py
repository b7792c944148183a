"""Hold an artifact's metadata commit back, from outside the worker, through PostgreSQL.

An open transaction that inserts the (tenant, sha256) row makes the worker's insert of the
same row wait for it: the worker has uploaded the object but cannot commit its ref. That
is the window between upload and commit, made as long as the test needs.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sqlalchemy import text

from durable_agents.activities.tools.base import ToolContext
from durable_agents.activities.tools.files import write_file
from durable_agents.workers.resources import Resources


@asynccontextmanager
async def artifact_commit_held(res: Resources, tenant: str, sha256: str) -> AsyncIterator[None]:
    conn = await res.engine.connect()
    trans = await conn.begin()
    try:
        await conn.execute(
            text(
                "INSERT INTO agent_artifacts (artifact_id, tenant_id, sha256, uri, content_type,"
                " size_bytes, schema_version, status) VALUES (:id, :t, :sha, 'held', 'x', 0, 1,"
                " 'active')"
            ),
            {"id": uuid.uuid4(), "t": tenant, "sha": sha256},
        )
        yield
    finally:
        await trans.rollback()
        await conn.close()


async def wait_until_commit_blocked(res: Resources, within_seconds: float = 30) -> None:
    """Until some backend waits on a lock while writing agent_artifacts."""
    await wait_until_lock_waited(res, "%INSERT INTO agent_artifacts%", within_seconds)


async def wait_until_lock_waited(
    res: Resources, query_like: str, within_seconds: float = 30
) -> None:
    """Until another backend whose query matches `query_like` (ILIKE) waits on a lock."""
    async with asyncio.timeout(within_seconds):
        while True:
            async with res.engine.connect() as conn:
                waiting = await conn.scalar(
                    text(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                        " AND query ILIKE :q AND pid <> pg_backend_pid()"
                    ),
                    {"q": query_like},
                )
            if waiting:
                return
            await asyncio.sleep(0.05)


async def write_file_result_sha(scratch: Path, path: str, content: str) -> str:
    """The sha256 of what write_file returns when it first applies (path, content): the
    artifact a test holds back to pause a write_file call between its effect and commit."""
    await asyncio.to_thread(scratch.mkdir, parents=True, exist_ok=True)
    ctx = ToolContext(idempotency_key="probe", workspace=scratch, tenant_id="t", session_id="s")
    out = await write_file(ctx, {"path": path, "content": content})
    return hashlib.sha256(out.content).hexdigest()
