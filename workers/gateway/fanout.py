"""One reader per followed session per gateway process, fanning what commits out to every
follower of the session in the process.

The reader is watch_live (woken by the EventHub's LISTEN/NOTIFY, rechecked by time): one page
read per notification however many clients follow the session, each change rendered once.
Each follower has its own bounded queue and its own cursor:

- it joins before it reads, reads from its cursor to the tail itself (its catch-up), then
  takes what the reader publishes. An item at or below its cursor is skipped (nothing
  repeated); an item past cursor + 1 (it joined a reader that was ahead of its own read)
  makes it read the gap itself first (nothing lost). Ordinals are contiguous per session:
  handed out under the session lock, in the transaction that commits the item.
- one that falls FOLLOWER_QUEUE entries behind (a client reading slower than its session
  commits) is cut off: its queue is emptied and its stream ends without `end`
  (StreamInterrupted); the client reconnects with Last-Event-ID and reads on from the
  database. A slow client so costs neither memory nor the other followers' time.

The reader starts with the first follower that caught up and stops when the last one leaves
(or the session ends); a reader that fails cuts its followers off the same way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.storage.artifacts import ArtifactStore
from durable_agents.storage.models import ItemRow, SessionRow
from durable_agents.storage.session_deltas import Delta
from durable_agents.storage.session_events import EventHub
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import TERMINAL_STATUSES
from durable_agents.workers.client.tasks import read_session
from durable_agents.workers.client.watch.follow import WATCH_PAGE, watch_live

# Entries queued for one follower before it is cut off: at ~2 commits/s per session this
# is minutes of a stalled client, while each entry is a reference to one shared rendering.
FOLLOWER_QUEUE = 1000
# The recheck of a session when no notification came (a lost LISTEN connection).
RECHECK_SECONDS = 15.0

Change = ItemRow | SessionRow | Delta
Render = Callable[[Change], dict[str, str]]

logger = logging.getLogger(__name__)


class StreamInterrupted(Exception):
    """This stream must end without its `end` event (its follower fell behind, or the
    session's reader failed); the client resumes with Last-Event-ID."""


@dataclass(frozen=True, slots=True)
class Published:
    """A change and its one rendering as an SSE event (shared by every follower)."""

    change: Change
    event: dict[str, str]


@dataclass(frozen=True, slots=True)
class _Ended:
    """The session ended: everything was published."""


@dataclass(frozen=True, slots=True)
class _Cut:
    why: str


_Entry = Published | _Ended | _Cut
_ENDED = _Ended()


class _Follower:
    """One stream's queue. Past half its bound its new deltas are dropped (ephemeral),
    keeping the rest for the items, which are the record; past its bound it is cut off."""

    __slots__ = ("bound", "cut", "deltas", "queue")

    def __init__(self, deltas: bool, bound: int) -> None:
        # Unbounded as a Queue; bounded by offer(), so the cut-off marker always fits.
        self.queue: asyncio.Queue[_Entry] = asyncio.Queue()
        self.deltas = deltas
        self.bound = bound
        self.cut = False

    def offer(self, entry: _Entry) -> bool:
        """Queue an entry; False when this follower was cut off by it."""
        if self.cut:
            return True
        size = self.queue.qsize()
        if isinstance(entry, Published) and isinstance(entry.change, Delta):
            if self.deltas and size < self.bound // 2:
                self.queue.put_nowait(entry)
            return True
        if size >= self.bound:
            self.cut_off("fell behind")
            return False
        self.queue.put_nowait(entry)
        return True

    def cut_off(self, why: str) -> None:
        self.cut = True
        while not self.queue.empty():  # its memory goes at once
            self.queue.get_nowait()
        self.queue.put_nowait(_Cut(why))


class _Channel:
    """One session's followers in this process and their reader."""

    __slots__ = ("followers", "reader")

    def __init__(self) -> None:
        self.followers: set[_Follower] = set()
        self.reader: asyncio.Task[None] | None = None


@dataclass
class _Position:
    """What one follower has been sent."""

    cursor: int
    deltas: bool
    shown: tuple[str, object] | None = None
    committed_step: int = -1
    ended: bool = False

    def admit(self, change: Change) -> bool:
        """Whether to send `change`, noting it as sent."""
        if isinstance(change, Delta):
            # A delta of a step whose item was sent is dropped: the item is the record.
            return self.deltas and change.step > self.committed_step
        if isinstance(change, ItemRow):
            if change.ordinal <= self.cursor:
                return False
            self.cursor = change.ordinal
            if change.kind == ItemKind.ASSISTANT_MESSAGE:
                self.committed_step = max(self.committed_step, _step_of(change))
            return True
        seen = (change.status, change.wait_detail)
        if seen == self.shown:
            return False
        self.shown = seen
        return True


class SessionFanout:
    """The readers and followers of the sessions streamed by this process."""

    def __init__(
        self,
        hub: EventHub,
        sessions: async_sessionmaker[AsyncSession],
        render: Render,
        *,
        store: ArtifactStore | None = None,
        recheck_seconds: float = RECHECK_SECONDS,
        queue: int = FOLLOWER_QUEUE,
    ) -> None:
        self._hub = hub
        self._queue = queue
        self._sessions = sessions
        self._render = render
        self._store = store
        self._recheck = recheck_seconds
        self._channels: dict[tuple[str, str], _Channel] = {}
        self.cut_offs = 0  # followers cut off for falling behind

    def readers(self) -> int:
        """Readers running now (one at most per followed session)."""
        return sum(
            1 for c in self._channels.values() if c.reader is not None and not c.reader.done()
        )

    def followers(self) -> int:
        return sum(len(c.followers) for c in self._channels.values())

    async def follow(
        self, tenant_id: str, session_id: str, after: int = 0, *, deltas: bool = True
    ) -> AsyncIterator[Published]:
        """The session's changes after `after`, each once and in order, until it ends. The
        session must belong to `tenant_id` (SessionNotFound from the first read, before
        anything is sent or any reader starts). Raises StreamInterrupted when cut off."""
        key = (tenant_id, session_id)
        channel = self._channels.setdefault(key, _Channel())
        me = _Follower(deltas, self._queue)
        # Joined before the first read: whatever the reader publishes from now is queued.
        channel.followers.add(me)
        try:
            pos = _Position(after, deltas)
            async for published in self._read_from(key, pos):
                yield published
            if pos.ended:
                return
            if channel.reader is None or channel.reader.done():
                channel.reader = asyncio.get_running_loop().create_task(
                    self._read(key, channel, pos.cursor), name=f"sse-reader {session_id}"
                )
            while True:
                entry = await me.queue.get()
                if isinstance(entry, _Cut):
                    raise StreamInterrupted(entry.why)
                if isinstance(entry, _Ended):
                    return
                change = entry.change
                if isinstance(change, ItemRow) and change.ordinal > pos.cursor + 1:
                    async for published in self._read_from(key, pos):
                        yield published
                if pos.admit(change):
                    yield entry
        finally:
            channel.followers.discard(me)
            if not channel.followers:
                if self._channels.get(key) is channel:
                    del self._channels[key]
                if channel.reader is not None:
                    channel.reader.cancel()

    async def _read_from(self, key: tuple[str, str], pos: _Position) -> AsyncIterator[Published]:
        """One follower's own reads, from its cursor to the tail."""
        tenant_id, session_id = key
        while True:
            row, items = await read_session(
                self._sessions,
                tenant_id,
                session_id,
                after=pos.cursor,
                limit=WATCH_PAGE,
                store=self._store,
            )
            changes: list[Change] = [row, *items]
            for change in changes:
                if pos.admit(change):
                    yield Published(change, self._render(change))
            if len(items) < WATCH_PAGE:
                pos.ended = row.status in TERMINAL_STATUSES
                return

    async def _read(self, key: tuple[str, str], channel: _Channel, after: int) -> None:
        tenant_id, session_id = key
        try:
            async for change in watch_live(
                self._sessions,
                tenant_id,
                session_id,
                after=after,
                poll_seconds=self._recheck,
                store=self._store,
                hub=self._hub,
                deltas=True,
            ):
                self._publish(channel, Published(change, self._render(change)))
            self._publish(channel, _ENDED)
        except Exception as err:  # any failure: its followers resume from the database
            logger.warning(
                "a session's event reader failed (%s); its followers are cut off to reconnect",
                type(err).__name__,
            )
            for follower in list(channel.followers):
                follower.cut_off("the session's reader failed")

    def _publish(self, channel: _Channel, entry: _Entry) -> None:
        for follower in list(channel.followers):
            if not follower.offer(entry):
                self.cut_offs += 1
                logger.info("an event stream fell %d events behind; cut off", self._queue)


def _step_of(item: ItemRow) -> int:
    step = item.data.get("step") if isinstance(item.data, dict) else None
    return step if isinstance(step, int) else -1
