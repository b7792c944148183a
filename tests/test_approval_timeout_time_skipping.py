"""An approval nobody gives times out after its (day-long) default, on the time-skipping
test server: the call is rejected, the model is told why, the run finishes."""

from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.workers.client import tasks
from durable_agents.workers.process.cloud import build_cloud_worker, cloud_activities, running
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.helpers import items_of


def _test_server() -> str:
    found = shutil.which("temporal-test-server")
    return found or str(Path(sys.executable).parent / "temporal-test-server")


async def test_default_day_long_approval_wait_times_out_and_the_model_is_told(
    resources: Resources, migrated: StackEndpoints, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "write_file", "arguments": {"path": "x.md", "content": "x"}}]}]
    )
    queue = f"skip-{uuid.uuid4().hex[:8]}"
    settings = migrated.settings(workspace=workspace, task_queue=queue, provider="scripted")
    acts = cloud_activities(settings, resources, provider, default_registry())
    async with await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=_test_server()
    ) as env:
        worker = build_cloud_worker(env.client, acts, task_queue=queue, max_cached_workflows=0)
        async with running(worker):
            handle = await tasks.start_task(
                env.client,
                resources.sessions,
                "write x",
                tasks.TaskOptions(
                    tenant_id=tenant,
                    task_queue=queue,
                ),
            )
            result = await handle.result()  # the server skips the 24 h wait

    assert result.status == "completed"
    session_id = handle.id.removeprefix("agent-")
    assert not (workspace / tenant / session_id / "x.md").exists()
    decision = next(
        i for i in await items_of(resources, tenant, session_id) if i.kind == "approval"
    )
    assert decision.data["decided_by"] == "timeout"
    assert decision.data["reason"] == "no decision within 86400s"
    told = next(m for m in provider.requests[1].messages if m.role == "tool")
    assert "rejected by timeout" in told.content
