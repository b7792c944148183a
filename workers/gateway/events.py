"""A session's live events for Server-Sent Events: each committed item in ordinal order as it
commits (its ordinal is the event id, so `Last-Event-ID` resumes with nothing lost and
nothing repeated), each change of status, the token deltas of the model call in flight
(`delta`, with no id: ephemeral, never replayed), and the end.

Woken by storage.session_events (LISTEN/NOTIFY), never a poll per client: one reader per
session per process (workers/gateway/fanout.py) reads AgentState after its cursor when woken,
and once every `recheck_seconds` besides, so a missed notification (a lost LISTEN connection)
only delays an event, never drops it; each change is rendered once and fanned out to the
session's followers.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.items import MAX_ORDINAL
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.storage.session_deltas import Delta
from durable_agents.storage.session_events import EventHub
from durable_agents.workers.client.http_bodies import Item
from durable_agents.workers.client.watch.wait_status import wait_line
from durable_agents.workers.gateway.fanout import (
    FOLLOWER_QUEUE,
    RECHECK_SECONDS,
    Change,
    SessionFanout,
)


def item_data(row: ItemRow) -> dict[str, Any]:
    """An item as the REST API reads it (workers/gateway/models.Item), as JSON values."""
    return Item.of(row).model_dump(mode="json")


def status_data(session: SessionRow) -> dict[str, Any]:
    return {"status": session.status, "detail": wait_line(session)}


def cursor_of(last_event_id: str | None, after: int) -> int:
    """Where a stream starts: after `Last-Event-ID` when the client reconnects, else `after`."""
    if last_event_id is None or not last_event_id.strip():
        return after
    try:
        cursor = int(last_event_id)
    except ValueError:
        raise ValueError(f"Last-Event-ID {last_event_id[:40]!r} is not an item ordinal") from None
    if not 0 <= cursor <= MAX_ORDINAL:  # ordinals are BIGINT
        raise ValueError("Last-Event-ID is not an item ordinal")
    return cursor


def render(change: Change) -> dict[str, str]:
    """A change as an SSE event (a dict for sse-starlette)."""
    if isinstance(change, Delta):
        # No id: Last-Event-ID stays the last committed item's ordinal.
        return {"event": "delta", "data": _json(change.data())}
    if isinstance(change, ItemRow):
        return {"id": str(change.ordinal), "event": "item", "data": _json(item_data(change))}
    return {"event": "status", "data": _json(status_data(change))}


def fanout(
    hub: EventHub,
    sessions: async_sessionmaker[AsyncSession],
    *,
    store: ArtifactStore | None = None,
    recheck_seconds: float = RECHECK_SECONDS,
    queue: int = FOLLOWER_QUEUE,
) -> SessionFanout:
    """The readers of a process's event streams, rendering as `render` does; `queue`:
    the events held for one stream before it is cut off."""
    return SessionFanout(
        hub, sessions, render, store=store, recheck_seconds=recheck_seconds, queue=queue
    )


async def session_events(
    hub: EventHub,
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    session_id: str,
    after: int = 0,
    *,
    store: ArtifactStore | None = None,
    recheck_seconds: float = RECHECK_SECONDS,
    deltas: bool = True,
    shared: SessionFanout | None = None,
) -> AsyncGenerator[dict[str, Any], None]:
    """SSE events (dicts for sse-starlette) for one session until it ends. The session must
    belong to `tenant_id` (SessionNotFound otherwise, before anything is sent); `store`
    brings an archived session back to read it; `deltas`: include token deltas; `shared`:
    the process's fan-out (else this stream reads for itself). Raises StreamInterrupted
    when the stream must end without `end` (the client resumes with Last-Event-ID)."""
    source = shared or fanout(hub, sessions, store=store, recheck_seconds=recheck_seconds)
    status, checked = "", None
    async for published in source.follow(tenant_id, session_id, after, deltas=deltas):
        if isinstance(published.change, SessionRow):
            status, checked = published.change.status, published.change.checked
        yield published.event
    # `checked`: a completion's check passed (false: it completed unchecked).
    yield {"event": "end", "data": _json({"status": status, "checked": checked})}


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
