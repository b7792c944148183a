"""Following a session from any device: each item as it commits, in order, and each change
of its status, until it ends; woken by LISTEN/NOTIFY when an EventHub is given."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from storage.artifacts import ArtifactStore
from storage.models import ItemRow, SessionRow
from storage.session_events import EventHub
from storage.session_status import TERMINAL_STATUSES
from workers.tasks import read_session

# Items read per query while a watcher catches up.
WATCH_PAGE = 200


async def watch_changes(
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    session_id: str,
    *,
    after: int = 0,
    poll_seconds: float = 0.3,
    store: ArtifactStore | None = None,
    hub: EventHub | None = None,
) -> AsyncIterator[ItemRow | SessionRow]:
    """Yield each item as it is committed, in order, and the session whenever its status (or
    a model wait's detail) changes, until the session ends.

    Resuming from a cursor (`after`) gives no gaps and no duplicates, because ordinals are
    handed out under the session lock and items are append-only. With `hub` the reads are
    woken by LISTEN/NOTIFY as changes commit, and `poll_seconds` is only the recheck.
    """
    cursor = after
    shown: tuple[str, object] | None = None
    following = hub.follow(tenant_id, session_id) if hub else contextlib.nullcontext(None)
    with following as woken:  # followed before the first read: nothing slips in between
        while True:
            row, items = await read_session(
                sessions, tenant_id, session_id, after=cursor, limit=WATCH_PAGE, store=store
            )
            if (row.status, row.wait_detail) != shown:
                shown = (row.status, row.wait_detail)
                yield row
            for item in items:
                cursor = item.ordinal
                yield item
            if len(items) == WATCH_PAGE:
                continue  # catching up
            if row.status in TERMINAL_STATUSES:
                return
            if woken is None:
                await asyncio.sleep(poll_seconds)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.get(), poll_seconds)


async def watch_items(
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    session_id: str,
    *,
    after: int = 0,
    poll_seconds: float = 0.3,
    store: ArtifactStore | None = None,
    on_status: Callable[[SessionRow], None] | None = None,
    hub: EventHub | None = None,
) -> AsyncIterator[ItemRow]:
    """The items of watch_changes; `on_status` hears each change of the session."""
    async for change in watch_changes(
        sessions,
        tenant_id,
        session_id,
        after=after,
        poll_seconds=poll_seconds,
        store=store,
        hub=hub,
    ):
        if isinstance(change, ItemRow):
            yield change
        elif on_status is not None:
            on_status(change)
