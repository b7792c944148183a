"""The device worker: serves device-local tools on `device-{id}`, from the device itself."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.worker import Worker

from activities.tool_run import ToolActivities
from workflows.policies import device_task_queue


def build_device_worker(client: Client, device_id: str, tools: ToolActivities) -> Worker:
    return Worker(client, task_queue=device_task_queue(device_id), activities=[tools.run_tool])
