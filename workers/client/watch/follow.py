"""Following a session from any device: each item as it commits, in order, and each change
of its status, until it ends; woken by LISTEN/NOTIFY when an EventHub is given, which also
brings the token deltas of the model call in flight (watch_live)."""

from __future__ import annotations

import asyncio
import contextlib
from asyncio import FIRST_COMPLETED
from collections.abc import AsyncIterator, Callable

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.storage.session_deltas import Delta
from durable_agents.storage.session_events import Change, EventHub
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import TERMINAL_STATUSES
from durable_agents.workers.client.tasks import read_session

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
    async for change in watch_live(
        sessions,
        tenant_id,
        session_id,
        after=after,
        poll_seconds=poll_seconds,
        store=store,
        hub=hub,
        deltas=False,
    ):
        if not isinstance(change, Delta):
            yield change


async def watch_live(
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    session_id: str,
    *,
    after: int = 0,
    poll_seconds: float = 0.3,
    store: ArtifactStore | None = None,
    hub: EventHub | None = None,
    deltas: bool = True,
) -> AsyncIterator[ItemRow | SessionRow | Delta]:
    """watch_changes, plus (with `hub` and `deltas`) the token deltas of the model call in
    flight as they are published. A step's deltas come before its assistant item; a delta
    of a step whose item was already yielded is dropped (the item is the record)."""
    cursor = after
    shown: tuple[str, object] | None = None
    committed_step = -1
    following = hub.follow(tenant_id, session_id) if hub else contextlib.nullcontext(None)
    previews = (
        hub.follow_deltas(tenant_id, session_id) if hub and deltas else contextlib.nullcontext(None)
    )
    # Followed before the first read: nothing slips in between.
    with following as woken, previews as pending:
        while True:
            row, items = await read_session(
                sessions, tenant_id, session_id, after=cursor, limit=WATCH_PAGE, store=store
            )
            if (row.status, row.wait_detail) != shown:
                shown = (row.status, row.wait_detail)
                yield row
            for item in items:
                cursor = item.ordinal
                if item.kind == ItemKind.ASSISTANT_MESSAGE:
                    committed_step = max(committed_step, _step_of(item))
                yield item
            if len(items) == WATCH_PAGE:
                continue  # catching up
            if row.status in TERMINAL_STATUSES:
                return
            if woken is None:
                await asyncio.sleep(poll_seconds)
            elif pending is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.get(), poll_seconds)
            else:
                async for delta in _deltas_until_woken(woken, pending, poll_seconds):
                    if delta.step > committed_step:
                        yield delta


async def _deltas_until_woken(
    woken: asyncio.Queue[Change], pending: asyncio.Queue[Delta], seconds: float
) -> AsyncIterator[Delta]:
    """The deltas that arrive until a wake-up (or for `seconds`). Those queued before the
    wake-up come first: the hub queues a step's deltas before its item's wake-up."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    wake = loop.create_task(woken.get())
    nxt: asyncio.Task[Delta] | None = None
    try:
        while True:
            while not pending.empty():
                yield pending.get_nowait()
            remaining = deadline - loop.time()
            if wake.done() or remaining <= 0:
                return
            nxt = loop.create_task(pending.get())
            await asyncio.wait({wake, nxt}, timeout=remaining, return_when=FIRST_COMPLETED)
            if nxt.done():
                yield nxt.result()
            else:
                nxt.cancel()  # a cancelled get() takes nothing from the queue
    finally:
        wake.cancel()
        if nxt is not None:
            nxt.cancel()


def _step_of(item: ItemRow) -> int:
    step = item.data.get("step") if isinstance(item.data, dict) else None
    return step if isinstance(step, int) else -1


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
