"""The pieces of a task that the verbs (workers/client/service.py) share: committing and
starting a task, committing and announcing a follow-up, a task's handle and live status, and
reading a session.

Content (the task text, follow-up messages) is committed to AgentState first; Temporal
only ever sees the session id and the item's id.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.activities.policies.text_limits import (
    TextLimits,
    check_size,
    check_text,
    utf8_size,
)
from durable_agents.storage.agent_state import AgentState, agent_state
from durable_agents.storage.archive import rehydrate_for_read
from durable_agents.storage.artifacts import ArtifactStore, check_user_tenant
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.storage.user_messages import stage_user_text, user_message_item
from durable_agents.storage.workspaces import validate_project
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.client.fairness import tenant_priority
from durable_agents.workers.client.resume_point import TaskNotResumable as TaskNotResumable
from durable_agents.workers.settings import get_settings
from durable_agents.workers.task_options import (
    TaskOptions as TaskOptions,  # the API callers know
)
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import (
    AgentStatus,
    SendMessageInput,
)
from durable_agents.workflows.policies import workflow_id_for


class TaskNotRunning(Exception):
    """The task's workflow has ended: it takes no message, decision or raise."""


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
    store: ArtifactStore | None = None,
    limits: TextLimits | None = None,
    check: Callable[[AgentState], Awaitable[None]] | None = None,
) -> WorkflowHandle[AgentWorkflow, Any]:
    """Commit the session and its first message, then start the workflow for it.

    A task over the inline limit is stored as an artifact first (needs `store`). `check`
    runs in the commit's transaction first (the command layer's quotas): what it raises
    rolls everything back."""
    limits = limits or get_settings().agent.text_limits()
    check_text("text", text)
    check_size("the task text", utf8_size(text), limits.max_task_bytes, "AGENT_MAX_TASK_BYTES")
    if not text.strip():
        raise ValueError("the task text is empty")
    # Validate everything before anything is committed.
    check_user_tenant(options.tenant_id)
    if options.project is not None:
        validate_project(options.project)
    staged = await stage_user_text(store, options.tenant_id, text, limits.inline_message_bytes)
    session_id = session_id or uuid.uuid4()
    workflow_id = workflow_id_for(str(session_id))
    async with agent_state(sessions, options.tenant_id, write=True) as st:
        # Inside the transaction: a refusal rolls back, so nothing is committed.
        await check_device(st, options)
        if check is not None:
            await check(st)
        await st.sessions.create(
            session_id,
            title=text[:200],
            model_config=options.model_config,
            workflow_id=workflow_id,
            project=options.project,
            agent_definition=options.agent,
            approvals=options.approvals_record(),
            task_check=options.check,
        )
        item = await user_message_item(
            st.db,
            store,
            staged,
            tenant_id=options.tenant_id,
            session_id=session_id,
            idempotency_key=f"{workflow_id}:task",
        )
        await st.items.append(item)
    return await client.start_workflow(
        AgentWorkflow.run,
        options.agent_input(str(session_id)),
        id=workflow_id,
        task_queue=options.task_queue,
        priority=tenant_priority(options.tenant_id),
    )


async def check_device(st: AgentState, options: TaskOptions) -> None:
    """A task may route tools only to a device its own tenant registered, and only tools
    that device serves: device identity is (tenant, device id)."""
    if options.device_id is None:
        return  # TaskOptions already refused device tools without a device
    device = await st.devices.get(options.device_id)
    if device is None:
        raise ValueError(
            f"no device {options.device_id!r} is registered for tenant {options.tenant_id!r}; "
            "start its device worker first (`agentctl devices` lists them)"
        )
    unserved = sorted(set(options.device_tools) - set(device.tools))
    if unserved:
        raise ValueError(
            f"device {options.device_id!r} does not serve {', '.join(map(repr, unserved))} "
            f"(it serves {', '.join(device.tools) or 'nothing'})"
        )


def task_handle(client: Client, session_id: str) -> WorkflowHandle[AgentWorkflow, Any]:
    return client.get_workflow_handle_for(AgentWorkflow.run, workflow_id_for(session_id))


async def check_running(handle: WorkflowHandle[AgentWorkflow, Any], session_id: str) -> None:
    """TaskNotRunning, naming the workflow's state, unless the task's workflow runs."""
    try:
        desc = await handle.describe()
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        raise TaskNotRunning(f"task {session_id} is not running (no workflow)") from None
    if desc.status != WorkflowExecutionStatus.RUNNING:
        state = desc.status.name.lower() if desc.status else "unknown"
        raise TaskNotRunning(f"task {session_id} is not running ({state})")


async def send_message(
    client: Client,
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    session_id: str,
    text: str,
    *,
    message_id: str | None = None,
    store: ArtifactStore | None = None,
    limits: TextLimits | None = None,
) -> ItemRow:
    """Commit a follow-up message and tell the running workflow about it.

    A message over the inline limit is stored as an artifact first (needs `store`)."""
    limits = limits or get_settings().agent.text_limits()
    check_text("text", text)
    check_size("the message", utf8_size(text), limits.max_message_bytes, "AGENT_MAX_MESSAGE_BYTES")
    if not text.strip():
        raise ValueError("the message is empty")
    # The tenant first: another tenant's session is not found, whatever state its task is in.
    async with agent_state(sessions, tenant_id) as st:
        await st.sessions.get(session_uuid(session_id))
    handle = task_handle(client, session_id)
    await check_running(handle, session_id)
    key = f"{handle.id}:user:{message_id or uuid.uuid4()}"
    staged = await stage_user_text(store, tenant_id, text, limits.inline_message_bytes)
    async with agent_state(sessions, tenant_id, write=True) as st:
        item = await user_message_item(
            st.db,
            store,
            staged,
            tenant_id=tenant_id,
            session_id=session_uuid(session_id),
            idempotency_key=key,
        )
        row, _ = await st.items.append(item)
    await handle.signal(
        AgentWorkflow.send_message, SendMessageInput(str(row.id), row.ordinal, tenant_id)
    )
    return row


async def live_status(client: Client, session_id: str) -> AgentStatus:
    return await task_handle(client, session_id).query(AgentWorkflow.status)


async def devices_away(
    sessions: async_sessionmaker[AsyncSession], tenant_id: str, live: AgentStatus
) -> list[str]:
    """The devices `live`'s pending calls wait on that are not online now (by their
    heartbeats, storage/devices.py)."""
    if not live.pending_devices:
        return []
    async with agent_state(sessions, tenant_id) as st:
        online = await st.devices.online_ids()
    return [device for device in live.pending_devices if device not in online]


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
    async with agent_state(sessions, tenant_id) as st:
        sid = session_uuid(session_id)
        row = await st.sessions.get(sid)
        if row.status == SessionStatus.ARCHIVED:
            await rehydrate_for_read(sessions, store, tenant_id, sid)
            await st.db.refresh(row)
        items = await st.items.page(sid, after_ordinal=after, limit=limit)
        return row, items
