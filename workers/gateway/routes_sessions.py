"""Routes that read: sessions (paged), a session with a page of items, the approvals
inbox across the tenant's sessions, artifact downloads, and the key's own identity."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Annotated

from fastapi import APIRouter, Query, status
from fastapi.responses import RedirectResponse
from temporalio.service import RPCError

from storage.api_keys import Principal
from storage.artifact_records import ArtifactRepository
from storage.items import MAX_ORDINAL, ItemRepository
from storage.models import SessionRow
from storage.session_status import SessionStatus
from storage.sessions import SessionRepository
from workers import tasks
from workers.gateway.auth import Reader
from workers.gateway.context import Gateway, GatewayDep
from workers.gateway.models import (
    Inbox,
    InboxEntry,
    Item,
    Me,
    PendingCall,
    Session,
    SessionList,
    SessionPage,
)

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1", tags=["read"])

MAX_PAGE = 1000  # as agentctl's pages
MAX_INBOX = 100
INBOX_QUERY_SECONDS = 5.0


@router.get("/me", response_model=Me)
async def me(principal: Reader) -> Me:
    """Who this key is: its tenant, user and scopes."""
    return Me(
        key_id=principal.key_id,
        tenant_id=principal.tenant_id,
        user_id=principal.user_id,
        scopes=sorted(principal.scopes),
    )


@router.get("/sessions", response_model=SessionList)
async def list_sessions(
    principal: Reader,
    gateway: GatewayDep,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    before: Annotated[uuid.UUID | None, Query(description="next_before of a page")] = None,
    status_: Annotated[SessionStatus | None, Query(alias="status")] = None,
) -> SessionList:
    """The tenant's sessions, newest first."""
    async with gateway.resources.sessions() as db:
        rows = await SessionRepository(db, principal.tenant_id).listing(
            limit=limit, before=before, status=status_
        )
    last = rows[-1].id if len(rows) == limit else None
    return SessionList(sessions=[Session.of(r) for r in rows], next_before=last)


@router.get("/sessions/{session_id}", response_model=SessionPage)
async def read_session(
    session_id: str,
    principal: Reader,
    gateway: GatewayDep,
    after: Annotated[int, Query(ge=0, le=MAX_ORDINAL)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 200,
) -> SessionPage:
    """A session and a page of its items after ordinal `after` (an archived session is
    rehydrated first)."""
    row, items = await tasks.read_session(
        gateway.resources.sessions,
        principal.tenant_id,
        session_id,
        after=after,
        limit=limit,
        store=gateway.resources.store,
    )
    more = items[-1].ordinal if len(items) == limit else None
    return SessionPage(session=Session.of(row), items=[Item.of(i) for i in items], next_after=more)


@router.get("/approvals", response_model=Inbox)
async def inbox(
    principal: Reader,
    gateway: GatewayDep,
    limit: Annotated[int, Query(ge=1, le=MAX_INBOX)] = 50,
) -> Inbox:
    """Sessions waiting for approval, with each call waiting and its arguments."""
    async with gateway.resources.sessions() as db:
        rows = await SessionRepository(db, principal.tenant_id).listing(
            limit=limit, status=SessionStatus.WAITING_APPROVAL
        )
    entries = await asyncio.gather(*(_entry(gateway, principal, r) for r in rows))
    return Inbox(entries=[e for e in entries if e is not None and e.pending])


async def _entry(gateway: Gateway, principal: Principal, row: SessionRow) -> InboxEntry | None:
    try:
        # A query needs a worker to answer: with none up it would wait; the inbox should not.
        async with asyncio.timeout(INBOX_QUERY_SECONDS):
            live = await tasks.live_status(gateway.client, str(row.id))
    except RPCError as err:
        # The workflow is gone or unreachable: the session's row is not a decision to offer.
        log.info("inbox: no live status for a waiting session (%s)", err.status)
        return None
    except TimeoutError:
        log.info("inbox: a waiting session's workflow did not answer in time")
        return None
    pending = []
    async with gateway.resources.sessions() as db:
        items = ItemRepository(db, principal.tenant_id)
        for p in live.pending_approvals:
            call = await items.tool_call(row.id, p.tool_call_id)
            arguments = call.data.get("arguments") if call is not None else None
            pending.append(
                PendingCall(
                    tool_call_id=p.tool_call_id,
                    name=p.name,
                    step=p.step,
                    rerun=p.rerun,
                    arguments=arguments if isinstance(arguments, dict) else None,
                )
            )
    return InboxEntry(session=Session.of(row), pending=pending)


@router.get(
    "/artifacts/{artifact_id}",
    status_code=status.HTTP_307_TEMPORARY_REDIRECT,
    response_class=RedirectResponse,
    responses={307: {"description": "Redirect to a short-lived presigned download URL."}},
)
async def download_artifact(
    artifact_id: uuid.UUID, principal: Reader, gateway: GatewayDep
) -> RedirectResponse:
    """Redirect to a short-lived URL of the artifact's bytes; X-Artifact-SHA256 names the
    digest a downloader should verify them against."""
    tenant, store = principal.tenant_id, gateway.resources.store
    async with gateway.resources.sessions() as db:
        row = await ArtifactRepository(db, tenant).get(artifact_id)
    ref = store.ref_for(tenant, row.sha256, row.size_bytes, row.content_type)
    url = await store.presigned_url(
        tenant, ref, expires_in=gateway.settings.gateway.presign_seconds
    )
    headers = {"Cache-Control": "no-store", "X-Artifact-SHA256": row.sha256}
    return RedirectResponse(url, status_code=status.HTTP_307_TEMPORARY_REDIRECT, headers=headers)
