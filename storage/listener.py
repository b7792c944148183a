"""One PostgreSQL LISTEN connection per process for every channel its subscribers name.

A notification is a hint to read again, never the data: NOTIFY is delivered at commit and
only to a connection that was LISTENing then, so whatever committed while the connection
was down (backend killed, network cut, server restarted) was told to nobody. The listener
therefore opens a lost connection again under the same lock that `start` takes (so there is
never a second one), re-LISTENs every channel, and then calls each subscriber's `missed`:
each re-reads its table after its cursor, and no wake is lost. Subscribers' handlers run
on the event loop, one notification at a time in the order the server sent them (one
connection for every channel keeps that order across channels too).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

import asyncpg

# A connect that hangs (a black-holed address) gives up after this and is tried again.
CONNECT_TIMEOUT_SECONDS = 10.0
# The wait before a failed connect is tried again doubles from the first to the last.
FIRST_RETRY_SECONDS = 0.5
LAST_RETRY_SECONDS = 15.0
# What a connect or a LISTEN raises when the server is away: tried again, never raised.
_UNREACHABLE = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)

Handler = Callable[[str], None]

logger = logging.getLogger(__name__)


class Listener:
    """LISTENs on the channels of its subscribers through one asyncpg connection to `dsn`
    (a libpq DSN) and hands each notification's payload to them. `async with` starts and
    closes it; `start` may be called any number of times and by every subscriber."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._handlers: dict[str, list[Handler]] = {}
        self._missed: list[Callable[[], None]] = []
        self._conn: Any = None
        self._listening: set[str] = set()  # the channels self._conn LISTENs on
        self._lock = asyncio.Lock()
        self._reconnecting: asyncio.Task[None] | None = None
        self._closed = False

    def subscribe(self, handlers: Mapping[str, Handler], missed: Callable[[], None]) -> None:
        """Call `handlers[channel](payload)` for each notification on `channel`, and
        `missed()` each time a connection starts listening (the first, and each one after
        a loss): anything committed before it was announced to nobody, so read again. A
        channel named after `start` is LISTENed by the next `start`."""
        for channel, handler in handlers.items():
            self._handlers.setdefault(channel, []).append(handler)
        self._missed.append(missed)

    @property
    def server_pid(self) -> int | None:
        """The PostgreSQL backend pid of the live connection (pg_stat_activity.pid)."""
        conn = self._conn
        return None if conn is None or conn.is_closed() else int(conn.get_server_pid())

    async def start(self) -> None:
        """Listen on every subscribed channel. Returns once listening, or with a reconnect
        under way when the server cannot be reached (the subscribers' `missed` then says
        when to read again): a caller never waits on an outage, never gets its error, and
        never opens a second connection. A closed listener stays closed."""
        if self._closed or self._reconnecting is not None:
            return
        async with self._lock:
            if self._closed or self._reconnecting is not None:
                return
            conn = self._conn
            try:
                if conn is not None and not conn.is_closed():
                    await self._listen_all(conn, self._listening)  # subscribed since
                    return
                await self._open()
            except _UNREACHABLE as err:
                logger.warning("LISTEN connection not open (%s); retrying", type(err).__name__)
                if conn is not None and not conn.is_closed():
                    conn.terminate()  # _lost opens a new one
                    return
                self._conn = None
                self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())
                return
        self._tell_missed()

    async def aclose(self) -> None:
        """Stop listening and close the connection; later starts do nothing."""
        self._closed = True
        task, self._reconnecting = self._reconnecting, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        async with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            with contextlib.suppress(*_UNREACHABLE):
                await conn.close(timeout=CONNECT_TIMEOUT_SECONDS)

    async def __aenter__(self) -> Listener:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _open(self) -> None:
        """A new connection listening on every channel; under the lock."""
        conn = await asyncpg.connect(self._dsn, timeout=CONNECT_TIMEOUT_SECONDS)
        listening: set[str] = set()
        try:
            await self._listen_all(conn, listening)
        except BaseException:
            conn.terminate()
            raise
        # No await from here on: a connection that dies later calls _lost with itself as
        # self._conn, one that died already is thrown away.
        conn.add_termination_listener(self._lost)
        if conn.is_closed():
            raise ConnectionResetError("LISTEN connection closed while opening")
        self._conn, self._listening = conn, listening

    async def _listen_all(self, conn: Any, listening: set[str]) -> None:
        # Until none is missing: a subscriber may add a channel while a LISTEN is awaited.
        while missing := [c for c in self._handlers if c not in listening]:
            for channel in missing:
                await conn.add_listener(channel, self._dispatch)
                listening.add(channel)

    def _dispatch(self, _conn: object, _pid: int, channel: str, payload: str) -> None:
        for handler in self._handlers.get(channel, ()):
            try:
                handler(payload)
            except Exception:  # one subscriber's fault must not deafen the others
                logger.exception("LISTEN subscriber failed on channel %s", channel)

    def _lost(self, conn: object) -> None:
        if self._closed or conn is not self._conn:
            return  # closed by aclose, or one already replaced
        logger.warning("LISTEN connection lost; reconnecting")
        self._conn = None
        if self._reconnecting is None:
            self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        delay = FIRST_RETRY_SECONDS
        attempts = 0
        try:
            while not self._closed:
                attempts += 1
                async with self._lock:
                    try:
                        await self._open()
                        break
                    except _UNREACHABLE as err:
                        if attempts == 1:
                            logger.warning("LISTEN reconnect failed (%s)", type(err).__name__)
                # Jittered, so that many processes do not all come back at the same moment.
                await asyncio.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, LAST_RETRY_SECONDS)
        finally:
            if self._reconnecting is asyncio.current_task():
                self._reconnecting = None
        if self._conn is not None:
            logger.info("LISTEN connection open again after %d attempt(s)", attempts)
            self._tell_missed()

    def _tell_missed(self) -> None:
        for missed in list(self._missed):
            try:
                missed()
            except Exception:
                logger.exception("LISTEN subscriber failed on a reconnect")
