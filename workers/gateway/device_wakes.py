"""Wake-ups of the device long-polls held by this gateway process: one LISTEN connection
for all of them, on durable_agents.storage.device_calls.CALLS_CHANNEL.

A call becomes pending (offered by the cloud's offer_device_call, or released after a
refused result) in one gateway-independent place, PostgreSQL, and its NOTIFY names the
(tenant, device) only; whichever gateway holds that device's poll wakes it and the poll
leases the call from the table. No process keeps anything per device beyond its open
polls, so any gateway serves any device. A lost connection wakes every poll (each
re-reads the table) and is opened again; polls re-read on their own every few seconds
anyway (a lease that ran out notifies nobody).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import asyncpg

from durable_agents.storage.device_calls import CALLS_CHANNEL, parse_wake

logger = logging.getLogger(__name__)

RECONNECT_SECONDS = 1.0


class DeviceWakes:
    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._waiting: dict[tuple[str, str], set[asyncio.Event]] = {}
        self._conn: Any = None
        self._closed = False
        self._starting = asyncio.Lock()
        self._reconnect: asyncio.Task[None] | None = None
        self.notifications = 0

    async def ensure_started(self) -> None:
        """Open the LISTEN connection on the first poll (a process no device polls holds
        none). A database that cannot be reached leaves polls to their re-reads."""
        if self._conn is not None or self._closed:
            return
        async with self._starting:
            if self._conn is None and not self._closed:
                try:
                    await self._start()
                except (OSError, asyncpg.PostgresError):
                    logger.warning("device wake-ups not listening; polls re-read meanwhile")

    async def _start(self) -> None:
        conn = await asyncpg.connect(self._dsn)
        conn.add_termination_listener(self._lost)
        await conn.add_listener(CALLS_CHANNEL, self._on_notify)
        self._conn = conn

    @contextlib.contextmanager
    def waiting(self, tenant_id: str, device_id: str) -> Iterator[asyncio.Event]:
        """An event set when the device may have a call to take, while the block runs.
        Enter before reading the table, so a call committed in between still wakes."""
        key = (tenant_id, device_id)
        event = asyncio.Event()
        self._waiting.setdefault(key, set()).add(event)
        try:
            yield event
        finally:
            events = self._waiting.get(key, set())
            events.discard(event)
            if not events:
                self._waiting.pop(key, None)

    def polls(self) -> int:
        return sum(len(e) for e in self._waiting.values())

    def _on_notify(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        key = parse_wake(payload)
        if key is None:
            return
        self.notifications += 1
        for event in self._waiting.get(key, ()):
            event.set()

    def _wake_all(self) -> None:
        for events in self._waiting.values():
            for event in events:
                event.set()

    def _lost(self, _conn: object) -> None:
        if self._closed:
            return
        logger.warning("device wake-up connection lost; reconnecting")
        self._conn = None
        self._wake_all()
        self._reconnect = asyncio.get_running_loop().create_task(self._reopen())

    async def _reopen(self) -> None:
        while not self._closed and self._conn is None:
            await asyncio.sleep(RECONNECT_SECONDS)
            with contextlib.suppress(OSError, asyncpg.PostgresError):
                async with self._starting:
                    if self._conn is None:
                        await self._start()
        self._wake_all()  # whatever was offered while it was down is read now

    async def aclose(self) -> None:
        self._closed = True
        if self._reconnect is not None:
            self._reconnect.cancel()
        if self._conn is not None and not self._conn.is_closed():
            await self._conn.close()
