"""Sub-agents: a `delegate` tool call becomes a child AgentWorkflow on its own child session.

The child passes the gate first (activities/policies/admission.py), as its parent's root
task: the kill switch, the root's budget, the tenant's quotas (the parent parks until they
allow it), the task's cap of sub-agents and the tenant's running tasks (the call gets that
refusal as its result). The parent only ever receives the child's summary and its artifact
refs, committed as the delegate call's tool result; the child's conversation stays in the
child session.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ChildWorkflowError

from durable_agents.workflows.contracts import (
    AgentInput,
    AgentResult,
    ChildSession,
    ChildSessionInput,
    DelegationResultInput,
    ToolCallRef,
    ToolErrorInput,
)
from durable_agents.workflows.parks import Parks
from durable_agents.workflows.policies import workflow_id_for
from durable_agents.workflows.state_writes import write_state

with workflow.unsafe.imports_passed_through():
    from durable_agents.activities.delegation import DelegationActivities
    from durable_agents.activities.session_state import SessionStateActivities
    from durable_agents.vocabulary.session_status import SessionStatus

DELEGATE_TOOL = "delegate"
MAX_DEPTH = 2


async def delegate(
    parent: AgentInput, step: int, call: ToolCallRef, key: str, parks: Parks
) -> None:
    """Run the child to its end and record what it produced as the call's result."""
    if parent.depth >= MAX_DEPTH:
        message = f"sub-agents may not delegate deeper than {MAX_DEPTH} levels"
        await _tool_error(parent, step, call, key, "DelegationTooDeep", message)
        return
    opening = ChildSessionInput(
        parent.session_id,
        parent.tenant_id,
        step,
        call.tool_call_id,
        key,
        budget=parent.settings.budget(),
        budget_session_id=parent.budget_root or parent.session_id,
    )
    while True:
        asked = parks.mark()
        try:
            child: ChildSession = await write_state(
                DelegationActivities.open_child_session, opening
            )
        except ActivityError as err:  # bad arguments from the model: tell it, carry on
            await _tool_error(parent, step, call, key, "InvalidArguments", str(err.cause or err))
            return
        if child.closed is None:
            break
        await parks.wait(child.closed, asked)
    if child.refused:
        return  # the refusal is the call's result already
    status: str = SessionStatus.COMPLETED
    error: str | None = None
    try:
        result: AgentResult = await workflow.execute_child_workflow(
            "AgentWorkflow",
            parent.for_child(child.session_id),
            id=workflow_id_for(child.session_id),
            result_type=AgentResult,
        )
        status = result.status
    except ChildWorkflowError as err:
        status, error = SessionStatus.FAILED, str(err.cause or err)[:300]
    await write_state(
        DelegationActivities.record_delegation,
        DelegationResultInput(
            parent.session_id,
            parent.tenant_id,
            step,
            call.tool_call_id,
            child.session_id,
            status,
            key,
            error,
        ),
    )


async def _tool_error(
    parent: AgentInput, step: int, call: ToolCallRef, key: str, error_type: str, message: str
) -> None:
    await write_state(
        SessionStateActivities.record_tool_error,
        ToolErrorInput(
            parent.session_id,
            parent.tenant_id,
            step,
            call.tool_call_id,
            call.name,
            error_type,
            message[:300],
            key,
        ),
    )
