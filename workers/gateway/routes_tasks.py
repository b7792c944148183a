"""Routes that act on tasks: start, follow up, approve, reject, cancel, resume, fork, replay
(and its report). Each
translates HTTP to a verb of the one service (workers/client/service.py), as the key's
caller: its tenant, its user (who decides) and its scopes. Another tenant's session is a
404 whatever state it is in.
"""

from __future__ import annotations

import uuid

from fastapi import APIRouter, status

from durable_agents.workers.client.commands import Caller, StartRequest
from durable_agents.workers.client.forks import ForkRequest
from durable_agents.workers.client.http_bodies import (
    Approve,
    Cancelled,
    Decided,
    FollowUp,
    ForkTask,
    MessageSent,
    Reject,
    ReplayReport,
    ReplayTask,
    Resume,
    Started,
    StartTask,
)
from durable_agents.workers.client.replays import ReplayRequest
from durable_agents.workers.gateway.auth import Approver, Reader, Starter
from durable_agents.workers.gateway.context import GatewayDep

router = APIRouter(prefix="/v1/sessions", tags=["tasks"])


@router.post("", status_code=status.HTTP_201_CREATED, response_model=Started)
async def start(body: StartTask, principal: Starter, gateway: GatewayDep) -> Started:
    """Start a task of an agent: the options a key's scopes allow, checked as at every
    other door."""
    options = body.model_dump(exclude_unset=True, exclude_none=True, exclude={"text", "agent"})
    request = StartRequest(body.text, body.agent, options)
    sid = await gateway.service.start(Caller.of_key(principal), request)
    return Started(session_id=uuid.UUID(sid))


@router.post(
    "/{session_id}/messages", status_code=status.HTTP_202_ACCEPTED, response_model=MessageSent
)
async def send(
    session_id: str, body: FollowUp, principal: Starter, gateway: GatewayDep
) -> MessageSent:
    """Send a follow-up message to a running task."""
    row = await gateway.service.send(Caller.of_key(principal), session_id, body.text)
    return MessageSent(item_id=row.id, ordinal=row.ordinal)


@router.post("/{session_id}/calls/{call_id}/approve", response_model=Decided)
async def approve(
    session_id: str, call_id: str, body: Approve, principal: Approver, gateway: GatewayDep
) -> Decided:
    """Approve a call waiting for approval, optionally with edited arguments; edits the
    tool's schema (as the call's turn recorded it) refuses are a 422 naming the field."""
    caller = Caller.of_key(principal)
    result = await gateway.service.approve(caller, session_id, call_id, arguments=body.arguments)
    return Decided(
        tool_call_id=result.tool_call_id, approved=result.approved, decided_by=principal.user_id
    )


@router.post("/{session_id}/calls/{call_id}/reject", response_model=Decided)
async def reject(
    session_id: str, call_id: str, body: Reject, principal: Approver, gateway: GatewayDep
) -> Decided:
    """Reject a waiting call; the model is told who rejected it and why."""
    caller = Caller.of_key(principal)
    result = await gateway.service.reject(caller, session_id, call_id, body.reason)
    return Decided(
        tool_call_id=result.tool_call_id, approved=result.approved, decided_by=principal.user_id
    )


@router.post("/{session_id}/cancel", response_model=Cancelled)
async def cancel(session_id: str, principal: Starter, gateway: GatewayDep) -> Cancelled:
    """Cancel a running task (cancelled=false if it had already ended)."""
    result = await gateway.service.cancel(Caller.of_key(principal), session_id)
    return Cancelled(session_id=uuid.UUID(result.session_id), cancelled=result.cancelled)


@router.post("/{session_id}/resume", response_model=Started)
async def resume(
    session_id: str, principal: Starter, gateway: GatewayDep, body: Resume | None = None
) -> Started:
    """Continue a failed or cancelled task from its last committed item (409 otherwise)."""
    max_steps = body.max_steps if body else None
    sid = await gateway.service.resume(Caller.of_key(principal), session_id, max_steps=max_steps)
    return Started(session_id=uuid.UUID(sid))


@router.post("/{session_id}/fork", status_code=status.HTTP_201_CREATED, response_model=Started)
async def fork(session_id: str, body: ForkTask, principal: Starter, gateway: GatewayDep) -> Started:
    """Fork the task at step `at` into a new task of the key's tenant (the task itself is
    not changed); 404 for another tenant's session, 409 when it cannot be forked there."""
    options = body.model_dump(
        exclude_unset=True, exclude_none=True, exclude={"at", "agent", "instruction", "results"}
    )
    request = ForkRequest(
        session_id, body.at, body.agent, body.instruction, options, body.results or {}
    )
    sid = await gateway.service.fork(Caller.of_key(principal), request)
    return Started(session_id=uuid.UUID(sid))


@router.post("/{session_id}/replay", status_code=status.HTTP_201_CREATED, response_model=Started)
async def replay(
    session_id: str, body: ReplayTask, principal: Starter, gateway: GatewayDep
) -> Started:
    """Replay the ended task against its record, with its agent or `agent`, running
    `live_tools` live (the task itself is not changed); 404 for another tenant's session,
    409 when it cannot be replayed. Its report: GET .../{replay id}/replay-report."""
    options = body.model_dump(
        exclude_unset=True, exclude_none=True, exclude={"agent", "live_tools"}
    )
    request = ReplayRequest(session_id, body.agent, list(body.live_tools), options)
    sid = await gateway.service.replay(Caller.of_key(principal), request)
    return Started(session_id=uuid.UUID(sid))


@router.get("/{session_id}/replay-report", response_model=ReplayReport)
async def replay_report(session_id: str, principal: Reader, gateway: GatewayDep) -> ReplayReport:
    """A replay's first divergence from its record (none: null) and what it served from the
    record; while it runs, as far as it got. 409 for a session that is no replay."""
    report = await gateway.service.replay_report(Caller.of_key(principal), session_id)
    return ReplayReport.of(report)
