"""Where a failed or cancelled task continues: the last run's own input, moved to the
last committed step.

The options (tools on a device, approval policies, timeouts, the outage deadline) come
from the start event of the last run in Temporal history, not from AgentState: that event
is exactly what the loop ran with, every AgentInput field included, while AgentState keeps
only some of them (the session row has no device, policies or timeouts).

The step comes from AgentState: the newest committed model reply's step. The new run
starts by re-running that step under its original idempotency keys, so call_model returns
the committed reply, run_tool returns committed results, recorded approval decisions stand,
and only what never happened runs.
"""

from __future__ import annotations

import copy
from dataclasses import replace

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus

from workflows.contracts import AgentInput

# Workflow states a task can be resumed from (a task stopped with `agentctl cancel` ends
# its workflow as completed, with the session cancelled: see `resumable`).
_STOPPED = (
    WorkflowExecutionStatus.FAILED,
    WorkflowExecutionStatus.CANCELED,
    WorkflowExecutionStatus.TERMINATED,
    WorkflowExecutionStatus.TIMED_OUT,
)
_RESUMABLE_SESSIONS = ("failed", "cancelled")


class TaskNotResumable(ValueError):
    """The task is running, completed or archived: there is nothing to resume."""


def check_resumable(
    session_id: str, workflow: WorkflowExecutionStatus | None, session_status: str
) -> None:
    """Refuse a task that runs or finished well, with one line saying which."""
    if workflow == WorkflowExecutionStatus.RUNNING:
        raise TaskNotResumable(f"task {session_id} is running; only a stopped task resumes")
    if workflow in _STOPPED or session_status in _RESUMABLE_SESSIONS:
        if session_status == "archived":
            raise TaskNotResumable(f"task {session_id} is archived; restore it first")
        return
    raise TaskNotResumable(
        f"task {session_id} is {session_status}; only a failed or cancelled task resumes"
    )


async def last_run_input(client: Client, workflow_id: str, run_id: str | None) -> AgentInput:
    """The input the given run of the task started with (its first history event)."""
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    async for event in handle.fetch_history_events(page_size=1):
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            break
        payloads = event.workflow_execution_started_event_attributes.input.payloads
        (inp,) = await client.data_converter.decode(payloads, [AgentInput])
        if isinstance(inp, AgentInput):
            return inp
    raise TaskNotResumable(f"task {workflow_id} has no start input to resume from")


def resumed_input(last: AgentInput, step: int | None, max_steps: int | None) -> AgentInput:
    """The new run's input: the last run's settings, the cursor at the last committed step."""
    at = step if step is not None else 0
    limit = max_steps if max_steps is not None else last.max_steps
    if step is not None and limit <= step + 1:
        raise TaskNotResumable(
            f"the task has used {step + 1} of its {last.max_steps} steps; "
            f"resume with more (--max-steps above {step + 1})"
        )
    return replace(
        copy.deepcopy(last), step=at, max_steps=limit, seen_messages=0, received_messages=0
    )
