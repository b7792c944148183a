"""Tenants share the task queue fairly (workers/client/fairness.py): every task starts with
its tenant as Temporal's fairness key, its sub-agents inherit it, and the stack's server
hands a backlog out round-robin across keys, so one tenant's flood does not hold another
tenant's work behind it; a worker configured with few slots keeps that backlog on the
server."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.common import Priority
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.workers.client.fairness import MAX_FAIRNESS_KEY_BYTES, tenant_priority
from durable_agents.workers.process.cloud import build_cloud_worker, worker_slots
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import AgentSettings
from durable_agents.workflows.policies import workflow_id_for
from tests.conftest import AgentRunner
from tests.support.helpers import items_of, start


def test_a_tenant_is_its_own_fairness_key_and_a_long_one_its_hash() -> None:
    assert tenant_priority("acme").fairness_key == "acme"
    at_limit = "t" * MAX_FAIRNESS_KEY_BYTES
    assert tenant_priority(at_limit).fairness_key == at_limit
    one, other = "a" * 128 + "1", "a" * 128 + "2"
    keys = {tenant_priority(one).fairness_key, tenant_priority(other).fairness_key}
    assert len(keys) == 2
    assert all(k is not None and len(k.encode()) <= MAX_FAIRNESS_KEY_BYTES for k in keys)


async def _fairness_key(handle: WorkflowHandle[object, object]) -> str:
    described = await handle.describe()
    return described.raw_description.workflow_execution_info.priority.fairness_key


async def test_a_task_and_its_sub_agent_run_under_their_tenants_fairness_key(
    client: Client, resources: Resources, agent_worker: AgentRunner, workspace: Path, tenant: str
) -> None:
    provider = ScriptedProvider.from_data(
        [{"tool_calls": [{"name": "delegate", "arguments": {"task": "SUB: say hi"}}]}],
        by_task={"SUB:": [{"text": "hi"}]},
    )
    async with agent_worker(provider, workspace) as queue:
        session_id, handle = await start(client, resources, queue, tenant=tenant)
        assert (await asyncio.wait_for(handle.result(), 60)).status == "completed"
    items = await items_of(resources, tenant, session_id)
    delegated = next(i for i in items if i.kind == "tool_result")
    child = client.get_workflow_handle(workflow_id_for(delegated.data["child_session_id"]))
    assert await _fairness_key(handle) == tenant
    assert await _fairness_key(child) == tenant  # inherited from its parent


ORDER: list[str] = []


@activity.defn
async def _work(tenant: str) -> None:
    ORDER.append(tenant)
    await asyncio.sleep(0.05)


@workflow.defn(sandboxed=False)
class _OneActivity:
    @workflow.run
    async def run(self, tenant: str) -> None:
        await workflow.execute_activity(_work, tenant, start_to_close_timeout=timedelta(seconds=30))


async def test_a_backlog_is_dispatched_round_robin_across_fairness_keys(client: Client) -> None:
    """12 activities of one key queue before one of another; one activity slot. In order of
    arrival the late key would run last; the stack's server runs it among the first."""
    queue = f"fair-{uuid.uuid4().hex[:8]}"
    ORDER.clear()
    flood = [
        await client.start_workflow(
            _OneActivity.run,
            "flood",
            id=f"{queue}-a{i}",
            task_queue=queue,
            priority=Priority(fairness_key="flood"),
        )
        for i in range(12)
    ]
    # Their workflow tasks run (many slots) and queue 12 activity tasks, none taken yet.
    workflows_only = Worker(
        client,
        task_queue=queue,
        workflows=[_OneActivity],
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_cached_workflows=0,
    )
    async with workflows_only:
        await asyncio.sleep(3)
    late = await client.start_workflow(
        _OneActivity.run,
        "late",
        id=f"{queue}-b",
        task_queue=queue,
        priority=Priority(fairness_key="late"),
    )
    both = Worker(
        client,
        task_queue=queue,
        workflows=[_OneActivity],
        activities=[_work],
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_concurrent_activities=1,
        max_cached_workflows=0,
    )
    async with both:
        await asyncio.wait_for(asyncio.gather(*(h.result() for h in [*flood, late])), 60)
    assert sorted(ORDER) == ["flood"] * 12 + ["late"]
    assert ORDER.index("late") <= 2, ORDER


async def test_a_cloud_worker_takes_as_many_tasks_at_once_as_its_settings_say(
    client: Client,
) -> None:
    """Fairness orders the server's backlog only: few slots keep a flood there."""
    queue = f"slots-{uuid.uuid4().hex[:8]}"
    defaults = build_cloud_worker(
        client, [], task_queue=queue, slots=worker_slots(AgentSettings())
    ).config()
    assert defaults.get("max_concurrent_activities") == 100
    assert defaults.get("max_concurrent_workflow_tasks") == 100
    assert defaults.get("disable_eager_activity_execution") is False
    isolated = AgentSettings(activity_slots=2, workflow_task_slots=4, eager_activities=False)
    config = build_cloud_worker(
        client, [], task_queue=f"{queue}-isolated", slots=worker_slots(isolated)
    ).config()
    assert config.get("max_concurrent_activities") == 2
    assert config.get("max_concurrent_workflow_tasks") == 4
    assert config.get("disable_eager_activity_execution") is True
