"""The input a run of AgentWorkflow started with, read back from its history by a client (a
resume) or by its own first activity. Not workflow code: it is here beside the contracts it
decodes, for every side that reads them."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from durable_agents.workflows.contracts import AgentInput


async def run_start_input(
    client: Client, workflow_id: str, run_id: str | None
) -> AgentInput | None:
    """The input a run of AgentWorkflow started with (its first history event), if any."""
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    async for event in handle.fetch_history_events(page_size=1):
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            return None
        payloads = event.workflow_execution_started_event_attributes.input.payloads
        (inp,) = await client.data_converter.decode(payloads, [AgentInput])
        return inp if isinstance(inp, AgentInput) else None
    return None
