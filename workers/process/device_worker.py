"""The device worker: serves device-local tools on `device:{tenant}:{id}`, from the device."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.worker import Worker

from durable_agents.activities.tool_run import ToolActivities
from durable_agents.workers.process.plugin import AgentPlugin
from durable_agents.workflows.policies import device_task_queue


def build_device_worker(
    client: Client, tenant_id: str, device_id: str, tools: ToolActivities
) -> Worker:
    """Poll the queue of (tenant, device) only: another tenant's device of the same name
    polls a queue of its own."""
    plugin = AgentPlugin([tools.run_tool], workflows=())
    return Worker(client, task_queue=device_task_queue(tenant_id, device_id), plugins=[plugin])
