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
import uuid
from dataclasses import replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.quotas import Quotas
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.client.fairness import tenant_priority
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import AgentInput
from durable_agents.workflows.policies import workflow_id_for
from durable_agents.workflows.run_input import run_start_input

# Workflow states a task can be resumed from (a task stopped with `agentctl cancel` ends
# its workflow as completed, with the session cancelled: see `resumable`).
_STOPPED = (
    WorkflowExecutionStatus.FAILED,
    WorkflowExecutionStatus.CANCELED,
    WorkflowExecutionStatus.TERMINATED,
    WorkflowExecutionStatus.TIMED_OUT,
)
_RESUMABLE_SESSIONS = (SessionStatus.FAILED, SessionStatus.CANCELLED)


class TaskNotResumable(ValueError):
    """The task is running, completed or archived: there is nothing to resume."""


async def resume_run(
    client: Client,
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    session_id: uuid.UUID,
    quotas: Quotas | None,
    *,
    max_steps: int | None = None,
) -> WorkflowHandle[AgentWorkflow, Any]:
    """Continue a failed or cancelled task from its last committed item, in a new run of
    the same workflow id (same session, same AgentState). TaskNotResumable otherwise;
    TenantFrozen or QuotaRefused (`quotas`: the deployment's defaults for the tenant) when
    the tenant's kill switch or quotas do not admit it among its running tasks again."""
    sid = str(session_id)
    async with agent_state(sessions, tenant_id) as st:
        row = await st.sessions.get(session_id)  # another tenant's: not found
        step = await st.items.last_model_step(session_id)
    desc = await client.get_workflow_handle(workflow_id_for(sid)).describe()
    check_resumable(sid, desc.status, row.status)
    last = await last_run_input(client, desc.id, desc.run_id)
    if row.forked_from is not None and (step is None or step < last.step):
        # A fork's newest reply may be its parent's (step STEP-1): its own runs start at
        # STEP or later, where its own keys begin (workers/client/forks.py).
        step = last.step
    resumed = resumed_input(last, step, max_steps)
    # Admitted in one transaction with its place among the running: a resume racing a
    # start (or another resume) for the last place cannot take it too.
    async with agent_state(sessions, tenant_id, write=True) as st:
        await st.controls.check_resume(session_id, quotas)
        await st.sessions.set_status(session_id, SessionStatus.RUNNING)
    try:
        # Started without a workflow-level conflict policy: a resume racing another one (or
        # a start) fails with WorkflowAlreadyStartedError instead of running the task twice.
        return await client.start_workflow(
            AgentWorkflow.run,
            resumed,
            id=desc.id,
            task_queue=desc.task_queue,
            priority=tenant_priority(tenant_id),
        )
    except BaseException:
        async with agent_state(sessions, tenant_id, write=True) as st:
            await st.sessions.set_status(session_id, row.status)  # as it was
        raise


def check_resumable(
    session_id: str, workflow: WorkflowExecutionStatus | None, session_status: str
) -> None:
    """Refuse a task that runs or finished well, with one line saying which."""
    if workflow == WorkflowExecutionStatus.RUNNING:
        raise TaskNotResumable(f"task {session_id} is running; only a stopped task resumes")
    if workflow in _STOPPED or session_status in _RESUMABLE_SESSIONS:
        if session_status == SessionStatus.ARCHIVED:
            raise TaskNotResumable(f"task {session_id} is archived; restore it first")
        return
    raise TaskNotResumable(
        f"task {session_id} is {session_status}; only a failed or cancelled task resumes"
    )


async def last_run_input(client: Client, workflow_id: str, run_id: str | None) -> AgentInput:
    """The input the given run of the task started with (its first history event)."""
    inp = await run_start_input(client, workflow_id, run_id)
    if inp is None:
        raise TaskNotResumable(f"task {workflow_id} has no start input to resume from")
    return inp


def resumed_input(last: AgentInput, step: int | None, max_steps: int | None) -> AgentInput:
    """The new run's input: the last run's settings, the cursor at the last committed step."""
    at = step if step is not None else 0
    limit = max_steps if max_steps is not None else last.settings.max_steps
    # None: a plain start's, which the new run resolves from its agent again.
    if step is not None and limit is not None and limit <= step + 1:
        raise TaskNotResumable(
            f"the task has used {step + 1} of its {last.settings.max_steps} steps; "
            f"resume with more (--max-steps above {step + 1})"
        )
    # The task text a plain client started with is committed already: not sent again.
    return replace(
        copy.deepcopy(last),
        settings=replace(copy.deepcopy(last.settings), max_steps=limit),
        step=at,
        seen_messages=0,
        received_messages=0,
        task_text=None,
    )
