"""End to end through a real cloud worker: a model that asks fetch_url for the stack's own
object store gets an error result, once, and every tenant's artifacts stay readable."""

from __future__ import annotations

from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.conftest import AgentRunner
from tests.support.helpers import items_of, start


async def test_fetch_of_the_object_store_is_an_error_result_after_one_attempt(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    agent_worker: AgentRunner,
    workspace: Path,
    tenant: str,
) -> None:
    kept = await resources.store.put(f"{tenant}-other", b"another tenant's report")
    # SeaweedFS serves S3 (and, on its other ports, the master and filer) on loopback.
    url = f"{migrated.s3_endpoint_url}/{migrated.s3_bucket}/?list-type=2"
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "fetch_url", "arguments": {"url": url}}]}]
    )
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        result = await handle.result()

    assert result.status == "completed"
    [denied] = [i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"]
    assert denied.data["error_type"] == "AddressDenied"
    assert denied.artifact_id is None
    assert "127.0.0.1, a loopback address" in denied.text
    history = await handle.fetch_history()
    run_tool = {
        e.event_id
        for e in history.events
        if e.activity_task_scheduled_event_attributes.activity_type.name == "run_tool"
    }
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id in run_tool
    ]
    assert attempts == [1], "a denied fetch is final, not retried"
    assert await resources.store.get(f"{tenant}-other", kept) == b"another tenant's report"
