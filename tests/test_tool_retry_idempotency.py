"""A side-effecting tool retried after a failure applies its effect once."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support.blocking import (
    artifact_commit_held,
    wait_until_commit_blocked,
    write_file_result_sha,
)
from tests.support.helpers import items_of, session_root, start

REPORT = "out/summary.md"
CONTENT = "# Summary\n\nwritten once, whatever the retries\n"


async def test_retry_after_timeout_does_not_duplicate_write_file_effect(
    client: Client,
    resources: Resources,
    agent_worker: AgentRunner,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    first_sha = await write_file_result_sha(tmp_path / "scratch", REPORT, CONTENT)
    provider = ScriptedProvider.from_data(
        [
            {
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": REPORT, "content": CONTENT}}
                ]
            }
        ]
    )
    sid = uuid.uuid4()
    target = session_root(workspace, tenant, sid) / REPORT
    async with agent_worker(provider, workspace) as queue:
        # Attempt 1 writes the file, uploads its result, then cannot commit: it times out.
        async with artifact_commit_held(resources, tenant, first_sha):
            session_id, handle = await start(
                client,
                resources,
                queue,
                tenant=tenant,
                session_id=sid,
                tool_timeout_seconds=3,
                loosened_approvals={"write_file": "never"},
                loosened_by="test",
            )
            await wait_until_commit_blocked(resources)
            first = os.stat(target)
            result = await asyncio.wait_for(handle.result(), 60)
            # Attempt 2 finished the call while attempt 1 was still stuck.
        after = os.stat(target)

    assert result.status == "completed"
    assert (after.st_ino, after.st_mtime_ns) == (first.st_ino, first.st_mtime_ns), "written twice"
    assert target.read_text() == CONTENT
    history = await handle.fetch_history()
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert max(attempts) >= 2, "the tool activity was expected to be retried"
    items = await items_of(resources, tenant, session_id)
    results = [i for i in items if i.kind == "tool_result"]
    assert len(results) == 1
    assert '"already_applied": true' in results[0].text
