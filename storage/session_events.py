"""Changes to sessions as they commit, from PostgreSQL's LISTEN/NOTIFY.

Triggers NOTIFY channel `agent_events` with ids only when an item commits
or a session's status changes; NOTIFY is delivered at commit, so a listener never hears of
a row it cannot read yet. One EventHub per process subscribes to the process's Listener
(storage/listener.py) and wakes whoever follows the session that changed: a wake-up says
"read again after your cursor", so a follower that misses one (a full queue, a reconnect:
then every follower is woken) loses nothing, it reads later. The same connection LISTENs
to the token deltas of storage/session_deltas.py, handed to the session's delta followers
as they come (ephemeral: a full queue drops them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy.engine import make_url

from durable_agents.storage.listener import Listener
from durable_agents.storage.session_deltas import DELTA_CHANNEL, Delta, parse_delta

CHANNEL = "agent_events"
# Deltas held for one follower that reads slower than the model writes; past that, newer
# deltas are dropped (the gap in seq shows it) and the committed item still arrives.
DELTA_QUEUE = 256


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
    """The session followers of this process, woken through its one Listener."""

    def __init__(self, listener: Listener) -> None:
        self._listener = listener
        self._followers: dict[tuple[str, str], set[asyncio.Queue[Change]]] = {}
        self._delta_followers: dict[tuple[str, str], set[asyncio.Queue[Delta]]] = {}
        self.notifications = 0
        self.deltas = 0
        self.dropped_deltas = 0
        listener.subscribe(
            {CHANNEL: self._on_notify, DELTA_CHANNEL: self._on_delta}, missed=self._wake_all
        )

    async def ensure_started(self) -> None:
        """Listen before the first follower reads (a process that never streams never
        holds a connection); an unreachable database wakes every follower once it is back."""
        await self._listener.start()

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

    def _on_notify(self, payload: str) -> None:
        change = parse(payload)
        if change is None:
            return
        self.notifications += 1
        for queue in self._followers.get((change.tenant_id, change.session_id), ()):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(change)

    def _on_delta(self, payload: str) -> None:
        delta = parse_delta(payload)
        if delta is None:
            return
        self.deltas += 1
        for queue in self._delta_followers.get((delta.tenant_id, delta.session_id), ()):
            try:
                queue.put_nowait(delta)
            except asyncio.QueueFull:
                self.dropped_deltas += 1

    def _wake_all(self) -> None:
        for (tenant, session), followers in self._followers.items():
            for queue in followers:
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait(Change(tenant, session))
