"""The demo task end to end on the real stack, with the offline model."""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.client import Client

from durable_agents.activities.providers.offline import REPORT_PATH, OfflineProvider
from durable_agents.workers.client import tasks
from durable_agents.workers.resources import Resources
from tests.conftest import AgentRunner
from tests.support.helpers import (
    copy_demo_workspace,
    decoded_payloads,
    items_of,
    run_approving,
    s3_sha256,
    session_root,
    start,
    stored_key,
)


async def test_demo_task_completes_and_every_ref_resolves_to_a_matching_object(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path
) -> None:
    sid = uuid.uuid4()
    copy_demo_workspace(session_root(workspace, "default", sid))
    async with agent_worker(OfflineProvider(), workspace) as queue:
        session_id, handle = await start(client, resources, queue, session_id=sid)
        result, approved = await run_approving(client, resources, session_id, handle)

    assert result.status == "completed"
    assert len(approved) == 1
    items = await items_of(resources, "default", session_id)
    kinds = [i.kind for i in items]
    assert kinds[0] == "user_message" and kinds[-1] == "assistant_message"
    # The decision the loop recorded, once it accepted it: the only approval item.
    assert kinds.count("approval") == 1
    assert sum("approved" in i.data for i in items if i.kind == "approval") == 1
    results = [i for i in items if i.kind == "tool_result"]
    # list_dir + four text files read + write_file
    assert len(results) == 6
    for item in results:
        info = item.data["artifact"]
        assert item.artifact_id is not None
        assert await s3_sha256(resources, stored_key(resources, item)) == info["sha256"]
        assert len(item.text) <= 500
    report = (session_root(workspace, "default", sid) / REPORT_PATH).read_text()
    # The report was built from file contents the model only saw through transient expansion.
    assert "readings.csv" in report and "| 7 |" in report
    row, _ = await tasks.read_session(resources.sessions, "default", session_id)
    assert row.status == "completed"
    ordinals = [i.ordinal for i in items]
    assert ordinals == sorted(set(ordinals))
    # History carries ids and refs: not the task, not what the tools read, not the report.
    payloads = decoded_payloads(await handle.fetch_history())
    for secretish in ("Survey the workspace", "LTE modem", "station,timestamp", "Workspace report"):
        assert secretish not in payloads
