"""Sending a person's decision on a waiting tool call to its workflow: the `approve` or
`reject` update, asked again where asking again is safe.

Two cases are asked again:

- The update RPC timed out on a busy worker while the update itself went through (seen with
  1,000 parked sessions approved at once). Asking under the same update id attaches to that
  update instead of making a second decision the workflow would refuse; the id is new per
  call, so a real second decision is still refused.
- The workflow refused the call as unknown (UnknownToolCall) although AgentState holds the
  call and no decision on it yet. That is a decision that raced the workflow task which
  starts the wait: a worker that dies between committing the model's reply and completing
  that task leaves the reply and the decision to its successor in one activation, and the
  SDK hands updates to the workflow before activity results, so the validator runs before
  the call is waiting. A status query may have shown the call pending (the dead worker's
  memory). Asked again once the task completed, the decision is accepted.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import (
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError

from durable_agents.storage.agent_state import agent_state
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import ApproveInput, DecisionResult, RejectInput

logger = logging.getLogger(__name__)

RPC_ATTEMPTS = 4
# Waits before asking again while the call is still being recorded: ~3 s in all, several
# workflow tasks' worth on a loaded worker.
RACE_WAITS_S = (0.2, 0.4, 0.8, 1.6)


async def send_decision(
    handle: WorkflowHandle[AgentWorkflow, Any],
    update: str,
    arg: ApproveInput | RejectInput,
    *,
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    session_id: uuid.UUID,
) -> DecisionResult:
    """Send `update` ("approve" or "reject") with `arg`; the workflow's result."""
    for wait in (*RACE_WAITS_S, None):
        try:
            return await _send(handle, update, arg)
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            unknown = isinstance(cause, ApplicationError) and cause.type == "UnknownToolCall"
            if not unknown or wait is None:
                raise
            if not await _still_to_decide(sessions, tenant_id, session_id, arg.tool_call_id):
                raise
            logger.info(
                "%s of %s refused while the workflow was still taking up the call; "
                "asking again in %.1f s",
                update,
                arg.tool_call_id,
                wait,
            )
            await asyncio.sleep(wait)
    raise AssertionError("unreachable")


async def _send(
    handle: WorkflowHandle[AgentWorkflow, Any], update: str, arg: ApproveInput | RejectInput
) -> DecisionResult:
    update_id = f"{update}:{arg.tool_call_id}:{uuid.uuid4()}"
    for attempt in range(1, RPC_ATTEMPTS + 1):
        try:
            result: DecisionResult = await handle.execute_update(
                update, arg, id=update_id, result_type=DecisionResult
            )
            return result
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            if attempt == RPC_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


async def _still_to_decide(
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    session_id: uuid.UUID,
    call_id: str,
) -> bool:
    """AgentState holds the model's call and neither the loop's record of a decision on it
    nor a result: the loop has yet to ask (or is asking) for a decision."""
    async with agent_state(sessions, tenant_id, autocommit=True) as st:
        rows = await st.items.for_tool_call(session_id, call_id)
    kinds = {row.kind for row in rows}
    recorded = any(row.kind == ItemKind.APPROVAL and "approved" in row.data for row in rows)
    return ItemKind.TOOL_CALL in kinds and ItemKind.TOOL_RESULT not in kinds and not recorded
