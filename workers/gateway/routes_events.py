"""GET /v1/sessions/{id}/events: a session's live events as Server-Sent Events.

Each committed item in ordinal order as it commits (`id:` is its ordinal, so a client that
reconnects with `Last-Event-ID` gets what came after: nothing lost, nothing repeated),
status changes (waiting_approval, waiting_device, waiting_model, completed, ...), a final
`end`, and a comment heartbeat every 15 s. A key holds a capped number of streams; a stream
whose key is revoked or expires ends (an `error` event, no `end`) within a few seconds.
Woken by LISTEN/NOTIFY through the process's one EventHub, never a poll per client: one
reader per session per process fans each committed item out (workers/gateway/fanout.py). A
client that falls far behind its session is cut off (the stream closes without `end`) and
reconnects with Last-Event-ID to read on from the database.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query
from sse_starlette.sse import EventSourceResponse

from durable_agents.storage.errors import SessionNotFound
from durable_agents.storage.items import MAX_ORDINAL
from durable_agents.workers.gateway.auth import Reader
from durable_agents.workers.gateway.context import GatewayDep
from durable_agents.workers.gateway.errors import ApiError
from durable_agents.workers.gateway.events import cursor_of, session_events
from durable_agents.workers.gateway.fanout import StreamInterrupted
from durable_agents.workers.gateway.key_holds import STREAM, until_ended

router = APIRouter(prefix="/v1", tags=["read"])
# A comment line this often keeps proxies from closing a quiet stream.
HEARTBEAT_SECONDS = 15
# The last event of a stream whose key was revoked or expired (a reconnect gets 401).
KEY_ENDED = json.dumps(
    {"type": "unauthorized", "message": "this stream's API key was revoked or has expired"}
)


@router.get("/sessions/{session_id}/events", response_class=EventSourceResponse)
async def events(
    session_id: str,
    principal: Reader,
    gateway: GatewayDep,
    after: Annotated[int, Query(ge=0, le=MAX_ORDINAL)] = 0,
    last_event_id: Annotated[str | None, Header()] = None,
) -> EventSourceResponse:
    """Server-Sent Events of one session of the key's tenant, until it ends."""
    try:
        cursor = cursor_of(last_event_id, after)
    except ValueError as err:
        raise ApiError(400, "bad_request", str(err)) from None
    hold = gateway.holds.acquire(principal.key_id, STREAM)  # 429 past the key's cap
    try:
        await gateway.hub.ensure_started()
        stream = session_events(
            gateway.hub,
            gateway.resources.sessions,
            principal.tenant_id,
            session_id,
            cursor,
            store=gateway.resources.store,
            shared=gateway.streams,
        )
        try:  # another tenant's or a missing session: 404 before the stream starts
            first = await anext(stream)
        except SessionNotFound:
            raise ApiError(404, "not_found", "no such session") from None
    except BaseException:
        hold.release()
        raise

    async def all_events() -> AsyncIterator[dict[str, Any]]:
        try:
            yield first
            try:
                async for event in until_ended(stream, hold.ended):
                    yield event
            except StreamInterrupted:
                return  # closed without `end`: the client resumes with Last-Event-ID
            if hold.ended.is_set():  # the key was revoked or expired: no more events
                yield {"event": "error", "data": KEY_ENDED}
        finally:
            hold.release()
            await stream.aclose()

    events = all_events()
    # A response never started (the client left at once) never runs the finally above.
    weakref.finalize(events, hold.release)
    return EventSourceResponse(events, ping=HEARTBEAT_SECONDS)
