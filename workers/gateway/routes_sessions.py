"""Routes that read: sessions (paged), a session with a page of items, the approvals
inbox across the tenant's sessions, artifact downloads, and the key's own identity."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Response, status
from fastapi.responses import RedirectResponse, StreamingResponse
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.activities.agents import DEFAULT_AGENT
from durable_agents.activities.policies.edited_arguments import call_schema
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.api_keys import Principal
from durable_agents.storage.download_types import download_headers
from durable_agents.storage.items import MAX_ORDINAL
from durable_agents.storage.models import SessionRow
from durable_agents.vocabulary.artifact_ref import ArtifactRef
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.agent_loading import load_agents
from durable_agents.workers.client import tasks
from durable_agents.workers.client.http_bodies import (
    Agents,
    AgentTool,
    AgentTools,
    ArtifactLink,
    BudgetEntry,
    Inbox,
    InboxEntry,
    Item,
    Me,
    PendingCall,
    Session,
    SessionList,
    SessionPage,
)
from durable_agents.workers.gateway.auth import Reader
from durable_agents.workers.gateway.context import Gateway, GatewayDep
from durable_agents.workers.gateway.errors import ApiError

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1", tags=["read"])

MAX_PAGE = 1000  # as agentctl's pages
MAX_INBOX = 100
INBOX_QUERY_SECONDS = 5.0
# A running session with no item and no status for this long is asked for waiting calls too.
QUIET_RUNNING = timedelta(seconds=60)


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
    async with agent_state(gateway.resources.sessions, principal.tenant_id) as st:
        rows = await st.sessions.listing(limit=limit, before=before, status=status_)
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
    """Sessions waiting for approval, with each call waiting and its arguments; and those
    parked at their budget, with what they spent."""
    # AgentState may show a session running while its run waits for a call: the decision
    # that moved it was recorded in a workflow task a stopped Temporal server lost
    # (docs/how-it-works.md). One running and quiet for QUIET_RUNNING is asked as well
    # (after every waiting one); only its waiting calls are listed, and its workflow out of
    # reach is no known wait.
    async with agent_state(gateway.resources.sessions, principal.tenant_id) as st:
        rows = await st.sessions.waiting_or_quiet(limit=limit, quiet_for=QUIET_RUNNING)
    asked = await asyncio.gather(*(_entry(gateway, principal, r) for r in rows))
    return Inbox(
        entries=[e for e in asked if isinstance(e, InboxEntry) and e.pending],
        budgets=await _parked_at_budget(gateway, principal, limit),
        unanswered=[
            e
            for r, e in zip(rows, asked, strict=True)
            if r.status == SessionStatus.WAITING_APPROVAL and isinstance(e, str)
        ],
    )


async def _parked_at_budget(
    gateway: Gateway, principal: Principal, limit: int
) -> list[BudgetEntry]:
    """From AgentState alone (no workflow query): the park's note names the figures."""
    async with agent_state(gateway.resources.sessions, principal.tenant_id) as st:
        rows = await st.sessions.listing(limit=limit, status=SessionStatus.BUDGET_EXHAUSTED)
        parked = []
        for row in rows:
            note = await st.items.first_of_kind(row.id, ItemKind.ERROR, last=True)
            parked.append(BudgetEntry(session=Session.of(row), reached=note.text if note else ""))
    return parked


async def _entry(
    gateway: Gateway, principal: Principal, row: SessionRow
) -> InboxEntry | str | None:
    """The session's calls waiting for a decision; its id when its workflow did not answer
    in time or could not be reached (nothing known of its calls); None when it is gone."""
    try:
        # A query needs a worker to answer: with none up it would wait; the inbox should not.
        async with asyncio.timeout(INBOX_QUERY_SECONDS):
            live = await gateway.live.get(row, lambda sid: tasks.live_status(gateway.client, sid))
    except RPCError as err:
        log.info("inbox: no live status for a waiting session (%s)", err.status)
        # A workflow that is gone is no decision to offer; one out of reach may still be.
        return None if err.status == RPCStatusCode.NOT_FOUND else str(row.id)
    except TimeoutError:
        log.info("inbox: a waiting session's workflow did not answer in time")
        return str(row.id)
    pending = []
    async with agent_state(gateway.resources.sessions, principal.tenant_id) as st:
        for p in live.pending_approvals:
            call = await st.items.tool_call(row.id, p.tool_call_id)
            arguments = call.data.get("arguments") if call is not None else None
            schema = await call_schema(st, call) if call else None
            pending.append(
                PendingCall(
                    tool_call_id=p.tool_call_id,
                    name=p.name,
                    step=p.step,
                    rerun=p.rerun,
                    arguments=arguments if isinstance(arguments, dict) else None,
                    schema=schema,
                    waiting_since=call.created_at if call is not None else None,
                )
            )
    return InboxEntry(session=Session.of(row), pending=pending)


@router.get("/sessions/{session_id}/tree", response_model=SessionList)
async def session_tree(session_id: str, principal: Reader, gateway: GatewayDep) -> SessionList:
    """Every session of this session's tree (its root, sub-agents and theirs), oldest first;
    each names its parent_id."""
    async with agent_state(gateway.resources.sessions, principal.tenant_id) as st:
        row = await st.sessions.get(tasks.session_uuid(session_id))
        root = await st.sessions.get(row.root_id) if row.root_id and row.root_id != row.id else row
        under = [r for r in await st.sessions.tree(root.id) if r.id != root.id]
    return SessionList(sessions=[Session.of(r) for r in [root, *under]])


@router.get("/agents", response_model=Agents)
async def agents(_: Reader, gateway: GatewayDep) -> Agents:
    """The agents a task can name: the default one and the deployment's definitions."""
    definitions = gateway.settings.agent.definitions
    named = [a.name for a in load_agents(definitions)] if definitions else []
    return Agents(agents=[DEFAULT_AGENT, *(n for n in named if n != DEFAULT_AGENT)])


@router.get("/agents/{name}/tools", response_model=AgentTools)
async def agent_tools(name: str, _: Reader, gateway: GatewayDep) -> AgentTools:
    """The tools a task of agent `name` can call, as the deployment defines it, and which
    of them it already asks approval for: what a start form offers to ask about. Tools an
    MCP toolset lists are known only to a worker: a toolset is named as `server.*`."""
    definitions = gateway.settings.agent.definitions
    agent = (
        next((a for a in load_agents(definitions) if a.name == name), None) if definitions else None
    )
    if agent is None and name != DEFAULT_AGENT:
        raise ApiError(404, "not_found", "no such agent")
    tools = agent.tools if agent is not None else builtin_tools()
    policies = agent.approvals if agent is not None else {}
    return AgentTools(
        agent=name,
        tools=[
            AgentTool(
                name=t.spec.name,
                description=_first_sentence(t.spec.description),
                approval=policies.get(t.spec.name)
                or (t.default_policy if t.needs_approval else None),
            )
            for t in tools
        ],
        toolsets=[f"{s.name}.*" for s in agent.toolsets] if agent is not None else [],
    )


def _first_sentence(text: str) -> str:
    return re.split(r"(?<=\.)\s", " ".join(text.split()), maxsplit=1)[0][:200]


async def _artifact(
    artifact_id: uuid.UUID, principal: Principal, gateway: Gateway
) -> tuple[ArtifactRef, str | None]:
    """The tenant's artifact and how its object is stored (None: the raw bytes)."""
    tenant, store = principal.tenant_id, gateway.resources.store
    async with agent_state(gateway.resources.sessions, tenant) as st:
        row = await st.artifacts.get(artifact_id)
    ref = store.ref_for(tenant, row.sha256, row.size_bytes, row.content_type)
    return ref, await store.stored_encoding(tenant, ref)


async def _presigned(ref: ArtifactRef, encoding: str | None, gateway: Gateway) -> ArtifactLink:
    seconds = gateway.settings.gateway.presign_seconds
    url = await gateway.resources.store.presigned_url(ref.tenant_id, ref, expires_in=seconds)
    return ArtifactLink(
        url=url,
        sha256=ref.sha256,
        size_bytes=ref.size_bytes,
        content_type=ref.content_type,
        expires_in=seconds,
        content_encoding=encoding,
    )


@router.get(
    "/artifacts/{artifact_id}",
    status_code=status.HTTP_307_TEMPORARY_REDIRECT,
    response_class=RedirectResponse,
    responses={
        200: {"description": "The raw bytes, decoded here (the object is stored compressed)."},
        307: {"description": "Redirect to a short-lived presigned download URL."},
    },
)
async def download_artifact(
    artifact_id: uuid.UUID, principal: Reader, gateway: GatewayDep
) -> Response:
    """The artifact's raw bytes, served as text, a raster image or an attachment, never as
    active content; X-Artifact-SHA256 names the digest a downloader should verify them
    against. A raw object: a redirect to a short-lived URL of the store. A compressed
    one: streamed from here, decoded — its store URL would hand out zstd bytes."""
    ref, encoding = await _artifact(artifact_id, principal, gateway)
    headers = {"Cache-Control": "no-store", "X-Artifact-SHA256": ref.sha256}
    if encoding is None:
        link = await _presigned(ref, encoding, gateway)
        return RedirectResponse(
            link.url, status_code=status.HTTP_307_TEMPORARY_REDIRECT, headers=headers
        )
    # Checked against the sha256 as it streams: a corrupted object ends the response early
    # (the client sees a short body, never a complete wrong one).
    body = gateway.resources.store.iter_chunks(ref.tenant_id, ref)
    # Served as the presigned URL serves it: never as the stored (untrusted) type, which
    # could make this the gateway's own HTML page; the sandboxing CSP is the second line.
    served = download_headers(ref.content_type, ref.sha256)
    headers["Content-Length"] = str(ref.size_bytes)
    headers["Content-Disposition"] = served.disposition
    return StreamingResponse(body, media_type=served.content_type, headers=headers)


@router.get("/artifacts/{artifact_id}/link", response_model=ArtifactLink)
async def artifact_link(
    artifact_id: uuid.UUID, principal: Reader, gateway: GatewayDep, response: Response
) -> ArtifactLink:
    """The short-lived URL of the artifact's bytes as JSON, for a browser page: fetch()
    cannot follow the redirect to the store's origin, but the page can open this URL."""
    response.headers["Cache-Control"] = "no-store"
    ref, encoding = await _artifact(artifact_id, principal, gateway)
    return await _presigned(ref, encoding, gateway)
