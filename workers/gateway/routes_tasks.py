"""Routes that act on tasks: start, follow up, approve, reject, cancel, resume.

Each goes through workers.client.tasks (as agentctl and workers.api do), as the tenant of the
request's key; who decides is the key's user. The session is checked to be the tenant's
before anything else, so another tenant's session is a 404 whatever state it is in.
"""

from __future__ import annotations

import uuid

from fastapi import APIRouter, status

from durable_agents.storage.api_keys import Principal
from durable_agents.storage.items import ItemRepository
from durable_agents.storage.sessions import SessionRepository
from durable_agents.workers.client import tasks
from durable_agents.workers.client.commands import Caller, StartRequest, start_command
from durable_agents.workers.client.http_bodies import (
    Approve,
    Cancelled,
    Decided,
    FollowUp,
    MessageSent,
    Reject,
    Resume,
    Started,
    StartTask,
)
from durable_agents.workers.gateway.auth import Approver, Starter
from durable_agents.workers.gateway.call_schemas import call_schema, check_arguments
from durable_agents.workers.gateway.context import Gateway, GatewayDep

router = APIRouter(prefix="/v1/sessions", tags=["tasks"])


async def owned_session(gateway: Gateway, principal: Principal, session_id: str) -> str:
    """The session id in its one spelling, once it is known to be the tenant's
    (SessionNotFound, a 404, otherwise)."""
    sid = tasks.session_uuid(session_id)
    async with gateway.resources.sessions() as db:
        await SessionRepository(db, principal.tenant_id).get(sid)
    return str(sid)


@router.post("", status_code=status.HTTP_201_CREATED, response_model=Started)
async def start(body: StartTask, principal: Starter, gateway: GatewayDep) -> Started:
    """Start a task of an agent, through the one command layer (workers/client/commands.py): the
    options a key's scopes allow, checked as at every other door."""
    options = body.model_dump(exclude_unset=True, exclude_none=True, exclude={"text", "agent"})
    request = StartRequest(body.text, body.agent, options)
    command = start_command(Caller.of_key(principal), request, gateway.settings)
    res = gateway.resources
    return Started(
        session_id=uuid.UUID(await command.start(gateway.client, res.sessions, res.store))
    )


@router.post(
    "/{session_id}/messages", status_code=status.HTTP_202_ACCEPTED, response_model=MessageSent
)
async def send(
    session_id: str, body: FollowUp, principal: Starter, gateway: GatewayDep
) -> MessageSent:
    """Send a follow-up message to a running task."""
    sid = await owned_session(gateway, principal, session_id)
    row = await tasks.send_message(
        gateway.client,
        gateway.resources.sessions,
        principal.tenant_id,
        sid,
        body.text,
        store=gateway.resources.store,
        limits=gateway.settings.agent.text_limits(),
    )
    return MessageSent(item_id=row.id, ordinal=row.ordinal)


@router.post("/{session_id}/calls/{call_id}/approve", response_model=Decided)
async def approve(
    session_id: str, call_id: str, body: Approve, principal: Approver, gateway: GatewayDep
) -> Decided:
    """Approve a call waiting for approval, optionally with edited arguments; edits the
    tool's schema (as the call's turn recorded it) refuses are a 422 naming the field."""
    sid = await owned_session(gateway, principal, session_id)
    if body.arguments is not None:
        async with gateway.resources.sessions() as db:
            call = await ItemRepository(db, principal.tenant_id).tool_call(uuid.UUID(sid), call_id)
            if call is not None:  # an unknown call is the workflow's 409 to answer
                check_arguments(await call_schema(db, principal.tenant_id, call), body.arguments)
    result = await tasks.approve(
        gateway.client,
        sid,
        call_id,
        principal.user_id,
        sessions=gateway.resources.sessions,
        tenant_id=principal.tenant_id,
        edited_arguments=body.arguments,
        limits=gateway.settings.agent.text_limits(),
    )
    return Decided(
        tool_call_id=result.tool_call_id, approved=result.approved, decided_by=principal.user_id
    )


@router.post("/{session_id}/calls/{call_id}/reject", response_model=Decided)
async def reject(
    session_id: str, call_id: str, body: Reject, principal: Approver, gateway: GatewayDep
) -> Decided:
    """Reject a waiting call; the model is told who rejected it and why."""
    sid = await owned_session(gateway, principal, session_id)
    result = await tasks.reject(
        gateway.client,
        sid,
        call_id,
        body.reason,
        principal.user_id,
        sessions=gateway.resources.sessions,
        tenant_id=principal.tenant_id,
    )
    return Decided(
        tool_call_id=result.tool_call_id, approved=result.approved, decided_by=principal.user_id
    )


@router.post("/{session_id}/cancel", response_model=Cancelled)
async def cancel(session_id: str, principal: Starter, gateway: GatewayDep) -> Cancelled:
    """Cancel a running task (cancelled=false if it had already ended)."""
    sid = await owned_session(gateway, principal, session_id)
    result = await tasks.cancel(
        gateway.client, gateway.resources.sessions, principal.tenant_id, sid
    )
    return Cancelled(session_id=uuid.UUID(sid), cancelled=result.cancelled)


@router.post("/{session_id}/resume", response_model=Started)
async def resume(
    session_id: str, principal: Starter, gateway: GatewayDep, body: Resume | None = None
) -> Started:
    """Continue a failed or cancelled task from its last committed item (409 otherwise)."""
    sid = await owned_session(gateway, principal, session_id)
    await tasks.resume(
        gateway.client,
        gateway.resources.sessions,
        principal.tenant_id,
        sid,
        max_steps=body.max_steps if body else None,
    )
    return Started(session_id=uuid.UUID(sid))
