"""History holds references, not content: a 1 MB tool result costs history a few hundred bytes."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support.helpers import decoded_payloads, items_of, s3_keys, session_root, start

ONE_MB = 1024 * 1024


def _big_file(path: Path) -> bytes:
    header = b"header line for the preview\n" * 40
    body = b"".join(b"unique-marker-%07d\n" % i for i in range((ONE_MB - len(header)) // 22 + 1))
    data = (header + body)[:ONE_MB]
    path.write_bytes(data)
    return data


async def test_one_megabyte_tool_result_grows_history_by_under_4kb(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    sid = uuid.uuid4()
    data = _big_file(session_root(workspace, tenant, sid) / "big.txt")
    sha = hashlib.sha256(data).hexdigest()
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "read_file", "arguments": {"path": "big.txt"}}]}]
    )
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        await handle.result()

    history = await handle.fetch_history()
    tool_events: list[int] = []
    scheduled: set[int] = set()
    for event in history.events:
        attrs = event.activity_task_scheduled_event_attributes
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED and (
            attrs.activity_type.name == "run_tool"
        ):
            scheduled.add(event.event_id)
            tool_events.append(event.ByteSize())
        elif event.event_type in (
            EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
            EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
        ):
            started = event.activity_task_started_event_attributes.scheduled_event_id
            completed = event.activity_task_completed_event_attributes.scheduled_event_id
            if started in scheduled or completed in scheduled:
                tool_events.append(event.ByteSize())
    assert len(tool_events) == 3
    assert sum(tool_events) < 4096, f"tool step added {sum(tool_events)} bytes to history"

    assert len(history.to_json()) < 64 * 1024
    payloads = decoded_payloads(history)
    assert sha in payloads  # the ref is there...
    assert "unique-marker-" not in payloads  # ...and no part of the content, not even a preview
    assert "header line for the preview" not in payloads

    # The megabyte is in S3 exactly once, under this tenant's content-addressed key.
    keys = await s3_keys(resources, f"{resources.store.prefix}/{tenant}/")
    assert [k for k in keys if k.endswith(sha)] == [
        f"{resources.store.prefix}/{tenant}/sha256/{sha[:2]}/{sha[2:4]}/{sha}"
    ]
    result = next(
        i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"
    )
    assert result.data["artifact"]["size_bytes"] == ONE_MB
    assert len(result.text) <= 500

    # The model saw the content (expanded transiently) but within its token budget.
    second_call = provider.requests[1]
    tool_msg = next(m for m in second_call.messages if m.role == "tool")
    assert "header line for the preview" in tool_msg.content
    assert "[truncated:" in tool_msg.content and sha in tool_msg.content
    assert len(tool_msg.content) < 64 * 1024
