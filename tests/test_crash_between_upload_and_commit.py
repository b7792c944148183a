"""Upload, verify, then commit: SIGKILL the worker after the upload and before the commit."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from pathlib import Path

from temporalio.client import Client

from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.blocking import artifact_commit_held, wait_until_commit_blocked
from tests.support.helpers import items_of, s3_keys, s3_sha256, session_root, start, stored_key
from tests.support.processes import WorkerProcess


async def test_worker_killed_after_upload_before_commit_resumes_without_dangling_or_duplicate(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    data = b"precious page %d\n" % 7 * 20_000
    sid = uuid.uuid4()
    (session_root(workspace, tenant, sid) / "page.txt").write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    queue = f"crash-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(
        migrated,
        queue=queue,
        workspace=workspace,
        log=tmp_path / "worker.log",
        script=[{"tool_calls": [{"name": "read_file", "arguments": {"path": "page.txt"}}]}],
    )
    prefix = f"{resources.store.prefix}/{tenant}/"
    async with artifact_commit_held(resources, tenant, sha):
        worker.start()
        await asyncio.to_thread(worker.wait_started)
        session_id, handle = await start(
            client, resources, queue, tenant=tenant, session_id=sid, tool_timeout_seconds=5
        )
        await wait_until_commit_blocked(resources)
        # The object is already in S3: the worker dies between upload and commit.
        assert any(k.endswith(sha) for k in await s3_keys(resources, prefix))
        worker.kill()

    # Uploaded, never committed: an orphan object at most, and no item refers to anything yet.
    assert [i.kind for i in await items_of(resources, tenant, session_id)] == [
        "user_message",
        "assistant_message",
        "tool_call",
    ]
    worker.start()
    try:
        result = await asyncio.wait_for(handle.result(), 60)
    finally:
        worker.stop()

    assert result.status == "completed"
    items = await items_of(resources, tenant, session_id)
    results = [i for i in items if i.kind == "tool_result"]
    assert len(results) == 1, "the retried call must not duplicate its result"
    assert len({i.idempotency_key for i in items}) == len(items)
    info = results[0].data["artifact"]
    assert info["sha256"] == sha
    key = stored_key(resources, results[0])
    assert await s3_sha256(resources, key) == sha
    assert [k for k in await s3_keys(resources, prefix) if k.endswith(sha)] == [key]
    history = await handle.fetch_history()
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert max(attempts) >= 2, "the tool activity should have been retried after the kill"
