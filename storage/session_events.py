"""Changes to sessions as they commit, from PostgreSQL's LISTEN/NOTIFY.

Triggers (migration 0013) NOTIFY channel `agent_events` with ids only when an item commits
or a session's status changes; NOTIFY is delivered at commit, so a listener never hears of
a row it cannot read yet. One EventHub per process holds one LISTEN connection and wakes
whoever follows the session that changed: a wake-up says "read again after your cursor",
so a listener that misses one (a full queue, a reconnect) loses nothing, it reads later.
The same connection LISTENs to the token deltas of storage/session_deltas.py, handed to
the session's delta followers as they come (ephemeral: a full queue drops them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import asyncpg
from sqlalchemy.engine import make_url

from durable_agents.storage.session_deltas import DELTA_CHANNEL, Delta, parse_delta

CHANNEL = "agent_events"
# How long a lost LISTEN connection waits before it is opened again.
RECONNECT_SECONDS = 1.0
# Deltas held for one follower that reads slower than the model writes; past that, newer
# deltas are dropped (the gap in seq shows it) and the committed item still arrives.
DELTA_QUEUE = 256

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Change:
    """A session changed: an item with `ordinal` committed, or its status became `status`."""

    tenant_id: str
    session_id: str
    ordinal: int | None = None
    status: str | None = None


def parse(payload: str) -> Change | None:
    """The change a notification describes; None for anything else on the channel."""
    try:
        data = json.loads(payload)
        return Change(
            tenant_id=str(data["t"]),
            session_id=str(data["s"]),
            ordinal=int(data["o"]) if "o" in data else None,
            status=str(data["status"]) if "status" in data else None,
        )
    except (ValueError, KeyError, TypeError):
        return None


def listen_dsn(database_url: str) -> str:
    """The plain libpq DSN of a SQLAlchemy asyncpg URL (asyncpg connects with it)."""
    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


class EventHub:
    """One LISTEN connection shared by every follower in this process."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._followers: dict[tuple[str, str], set[asyncio.Queue[Change]]] = {}
        self._delta_followers: dict[tuple[str, str], set[asyncio.Queue[Delta]]] = {}
        self._conn: Any = None
        self._closed = False
        self._reconnect: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()
        self.notifications = 0
        self.deltas = 0
        self.dropped_deltas = 0

    async def ensure_started(self) -> None:
        """Open the LISTEN connection on first use (a process that never streams never
        holds one)."""
        async with self._starting:
            if self._conn is None and not self._closed:
                await self.start()

    async def start(self) -> None:
        self._conn = await asyncpg.connect(self._dsn)
        self._conn.add_termination_listener(self._lost)
        await self._conn.add_listener(CHANNEL, self._on_notify)
        await self._conn.add_listener(DELTA_CHANNEL, self._on_delta)

    async def aclose(self) -> None:
        self._closed = True
        if self._reconnect is not None:
            self._reconnect.cancel()
        if self._conn is not None and not self._conn.is_closed():
            await self._conn.close()

    @contextlib.contextmanager
    def follow(self, tenant_id: str, session_id: str) -> Iterator[asyncio.Queue[Change]]:
        """A queue woken on each change of this session while the block runs. Follow
        before reading, so a change committed in between still wakes the reader."""
        key = (tenant_id, session_id)
        # One pending wake-up is enough: the reader reads everything after its cursor.
        queue: asyncio.Queue[Change] = asyncio.Queue(maxsize=1)
        self._followers.setdefault(key, set()).add(queue)
        try:
            yield queue
        finally:
            followers = self._followers.get(key, set())
            followers.discard(queue)
            if not followers:
                self._followers.pop(key, None)

    @contextlib.contextmanager
    def follow_deltas(self, tenant_id: str, session_id: str) -> Iterator[asyncio.Queue[Delta]]:
        """A queue of the session's token deltas, in the order published, while the block
        runs; bounded (DELTA_QUEUE): a follower that falls behind misses deltas."""
        key = (tenant_id, session_id)
        queue: asyncio.Queue[Delta] = asyncio.Queue(maxsize=DELTA_QUEUE)
        self._delta_followers.setdefault(key, set()).add(queue)
        try:
            yield queue
        finally:
            followers = self._delta_followers.get(key, set())
            followers.discard(queue)
            if not followers:
                self._delta_followers.pop(key, None)

    def followers(self) -> int:
        return sum(len(f) for f in self._followers.values())

    def _on_notify(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        change = parse(payload)
        if change is None:
            return
        self.notifications += 1
        for queue in self._followers.get((change.tenant_id, change.session_id), ()):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(change)

    def _on_delta(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        delta = parse_delta(payload)
        if delta is None:
            return
        self.deltas += 1
        for queue in self._delta_followers.get((delta.tenant_id, delta.session_id), ()):
            try:
                queue.put_nowait(delta)
            except asyncio.QueueFull:
                self.dropped_deltas += 1

    def _lost(self, _conn: object) -> None:
        if self._closed:
            return
        logger.warning("LISTEN connection lost; reconnecting (followers re-read meanwhile)")
        self._wake_all()
        self._reconnect = asyncio.get_running_loop().create_task(self._reopen())

    async def _reopen(self) -> None:
        while not self._closed:
            await asyncio.sleep(RECONNECT_SECONDS)
            try:
                await self.start()
            except (OSError, asyncpg.PostgresError):
                continue
            self._wake_all()  # whatever committed while it was down is read now
            return

    def _wake_all(self) -> None:
        for (tenant, session), followers in self._followers.items():
            for queue in followers:
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait(Change(tenant, session))
