"""What a user does to a task, from any device: start, send, approve, reject, read.

Content (the task text, follow-up messages) is committed to AgentState first; Temporal
only ever sees the session id and the item's id.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)

from activities.approval_policy import validate as validate_policy
from activities.tokens import count_tokens
from storage.archive import rehydrate_for_read
from storage.artifacts import ArtifactStore, check_user_tenant
from storage.devices import validate_device_id
from storage.items import ItemRepository, NewItem
from storage.models import ItemRow, SessionRow
from storage.sessions import SessionRepository
from workflows.agent import AgentWorkflow
from workflows.contracts import (
    AgentInput,
    AgentStatus,
    ApproveInput,
    DecisionResult,
    RejectInput,
    SendMessageInput,
)
from workflows.policies import CLOUD_TASK_QUEUE, workflow_id_for

TERMINAL = ("completed", "failed", "cancelled")

# Upper bounds a task may ask for: past them a value is a typo, not a plan.
MAX_STEPS = 10_000
MAX_APPROVAL_WAIT_SECONDS = 30 * 24 * 3600
MAX_TOOL_TIMEOUT_SECONDS = 24 * 3600
MAX_DEVICE_WAIT_SECONDS = 7 * 24 * 3600


def _check_range(name: str, value: float, low: float, high: float, *, open_low: bool) -> None:
    # Written so NaN fails too: every comparison with it is False.
    inside = (low < value if open_low else low <= value) and value <= high
    if not inside:
        bound = f"> {low:g}" if open_low else f">= {low:g}"
        raise ValueError(f"{name} must be {bound} and <= {high:g}, got {value!r}")


@dataclass
class TaskOptions:
    tenant_id: str = "default"
    max_steps: int = 24
    device_id: str | None = None
    device_tools: list[str] = field(default_factory=list)
    approval_overrides: dict[str, bool] = field(default_factory=dict)
    approval_policies: dict[str, str] = field(default_factory=dict)
    approval_timeout_seconds: float = 24 * 3600
    tool_timeout_seconds: float = 120
    device_schedule_to_start_seconds: float = 3600
    continue_as_new_every: int = 0
    task_queue: str = CLOUD_TASK_QUEUE
    model_config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Refuse options that would fail the task at once or make it wait forever, so
        nothing is committed for them (ValueError naming the field)."""
        _check_range("max_steps", self.max_steps, 1, MAX_STEPS, open_low=False)
        _check_range(
            "continue_as_new_every", self.continue_as_new_every, 0, MAX_STEPS, open_low=False
        )
        for name, high in (
            ("approval_timeout_seconds", MAX_APPROVAL_WAIT_SECONDS),
            ("tool_timeout_seconds", MAX_TOOL_TIMEOUT_SECONDS),
            ("device_schedule_to_start_seconds", MAX_DEVICE_WAIT_SECONDS),
        ):
            _check_range(name, getattr(self, name), 0, high, open_low=True)
        if self.device_id is not None:
            validate_device_id(self.device_id)
        elif self.device_tools:
            raise ValueError("device_tools need a device_id to run on")
        if not self.task_queue:
            raise ValueError("task_queue is empty")
        for policy in self.approval_policies.values():
            validate_policy(policy)


class TaskNotRunning(Exception):
    pass


def session_uuid(session_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(session_id)
    except ValueError:
        raise ValueError(f"not a session id: {session_id!r} (expected a UUID)") from None


async def start_task(
    client: Client,
    sessions: async_sessionmaker[AsyncSession],
    text: str,
    options: TaskOptions,
    *,
    session_id: uuid.UUID | None = None,
) -> WorkflowHandle[AgentWorkflow, Any]:
    """Commit the session and its first message, then start the workflow for it."""
    if not text.strip():
        raise ValueError("the task text is empty")
    # Validate everything before anything is committed.
    check_user_tenant(options.tenant_id)
    policies = {tool: validate_policy(p) for tool, p in options.approval_policies.items()}
    session_id = session_id or uuid.uuid4()
    workflow_id = workflow_id_for(str(session_id))
    async with sessions() as db, db.begin():
        await SessionRepository(db, options.tenant_id).create(
            session_id,
            title=text[:200],
            model_config=options.model_config,
            workflow_id=workflow_id,
        )
        await ItemRepository(db, options.tenant_id).append(
            NewItem(
                session_id=session_id,
                kind="user_message",
                role="user",
                idempotency_key=f"{workflow_id}:task",
                text=text,
                tokens=count_tokens(text),
            )
        )
    return await client.start_workflow(
        AgentWorkflow.run,
        AgentInput(
            session_id=str(session_id),
            tenant_id=options.tenant_id,
            max_steps=options.max_steps,
            device_id=options.device_id,
            device_tools=list(options.device_tools),
            approval_overrides=dict(options.approval_overrides),
            approval_policies=policies,
            approval_timeout_seconds=options.approval_timeout_seconds,
            tool_timeout_seconds=options.tool_timeout_seconds,
            device_schedule_to_start_seconds=options.device_schedule_to_start_seconds,
            continue_as_new_every=options.continue_as_new_every,
        ),
        id=workflow_id,
        task_queue=options.task_queue,
    )


def task_handle(client: Client, session_id: str) -> WorkflowHandle[AgentWorkflow, Any]:
    return client.get_workflow_handle_for(AgentWorkflow.run, workflow_id_for(session_id))


async def send_message(
    client: Client,
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    session_id: str,
    text: str,
    *,
    message_id: str | None = None,
) -> ItemRow:
    """Commit a follow-up message and tell the running workflow about it."""
    if not text.strip():
        raise ValueError("the message is empty")
    handle = task_handle(client, session_id)
    desc = await handle.describe()
    if desc.status != WorkflowExecutionStatus.RUNNING:
        state = desc.status.name.lower() if desc.status else "unknown"
        raise TaskNotRunning(f"task {session_id} is not running ({state})")
    key = f"{handle.id}:user:{message_id or uuid.uuid4()}"
    async with sessions() as db, db.begin():
        row, _ = await ItemRepository(db, tenant_id).append(
            NewItem(
                session_id=session_uuid(session_id),
                kind="user_message",
                role="user",
                idempotency_key=key,
                text=text,
                tokens=count_tokens(text),
            )
        )
    await handle.signal(AgentWorkflow.send_message, SendMessageInput(str(row.id), row.ordinal))
    return row


async def approve(
    client: Client,
    session_id: str,
    call_id: str,
    by: str,
    *,
    tenant_id: str | None = None,
    device_id: str | None = None,
    sessions: async_sessionmaker[AsyncSession] | None = None,
    edited_arguments: dict[str, Any] | None = None,
) -> DecisionResult:
    """Approve a waiting call, optionally with edited arguments to run instead.

    Edited arguments are content: they are committed to AgentState first (as a proposal
    only the decision can adopt) and the update carries the item's id.
    """
    proposal: str | None = None
    if edited_arguments is not None:
        if sessions is None or tenant_id is None:
            raise ValueError("edited arguments need the AgentState sessions and the tenant")
        async with sessions() as db, db.begin():
            row, _ = await ItemRepository(db, tenant_id).append(
                NewItem(
                    session_id=session_uuid(session_id),
                    kind="approval",
                    role="user",
                    idempotency_key=f"{workflow_id_for(session_id)}:edit:{uuid.uuid4()}",
                    text=f"{by} proposed edited arguments",
                    tool_call_id=call_id,
                    data={"proposed_arguments": edited_arguments, "proposed_by": by},
                )
            )
            proposal = str(row.id)
    return await _decide(
        task_handle(client, session_id),
        "approve",
        ApproveInput(call_id, by, tenant_id, device_id, proposal),
    )


async def reject(
    client: Client,
    session_id: str,
    call_id: str,
    reason: str,
    by: str,
    *,
    tenant_id: str | None = None,
    device_id: str | None = None,
) -> DecisionResult:
    return await _decide(
        task_handle(client, session_id),
        "reject",
        RejectInput(call_id, reason, by, tenant_id, device_id),
    )


# A decision's update RPC can time out on a busy worker while the update itself goes
# through (seen with 1,000 parked sessions approved at once). Asking again under the same
# update id attaches to that update instead of making a second decision the workflow would
# refuse; the id is new per call, so a real second decision is still refused.
DECISION_ATTEMPTS = 4


async def _decide(
    handle: WorkflowHandle[AgentWorkflow, Any],
    update: str,
    arg: ApproveInput | RejectInput,
) -> DecisionResult:
    update_id = f"{update}:{arg.tool_call_id}:{uuid.uuid4()}"
    for attempt in range(1, DECISION_ATTEMPTS + 1):
        try:
            result: DecisionResult = await handle.execute_update(
                update, arg, id=update_id, result_type=DecisionResult
            )
            return result
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            if attempt == DECISION_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


async def live_status(client: Client, session_id: str) -> AgentStatus:
    return await task_handle(client, session_id).query(AgentWorkflow.status)


async def read_session(
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    session_id: str,
    *,
    after: int = 0,
    limit: int | None = None,
    store: ArtifactStore | None = None,
) -> tuple[SessionRow, list[ItemRow]]:
    """The session and a page of its items; an archived one is rehydrated first (needs
    `store`, else SessionArchived)."""
    async with sessions() as db:
        sid = session_uuid(session_id)
        row = await SessionRepository(db, tenant_id).get(sid)
        if row.status == "archived":
            await rehydrate_for_read(sessions, store, tenant_id, sid)
            await db.refresh(row)
        items = await ItemRepository(db, tenant_id).page(sid, after_ordinal=after, limit=limit)
        return row, items


async def watch_items(
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    session_id: str,
    *,
    after: int = 0,
    poll_seconds: float = 0.3,
    store: ArtifactStore | None = None,
) -> AsyncIterator[ItemRow]:
    """Yield each item as it is committed, in order, until the session ends.

    Resuming from a cursor (`after`) gives no gaps and no duplicates, because ordinals are
    handed out under the session lock and items are append-only.
    """
    cursor = after
    while True:
        row, items = await read_session(sessions, tenant_id, session_id, after=cursor, store=store)
        for item in items:
            cursor = item.ordinal
            yield item
        if row.status in TERMINAL and not items:
            return
        await asyncio.sleep(poll_seconds)
