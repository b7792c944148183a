"""Wake-ups of the device long-polls held by this gateway process, subscribed to the
process's one Listener (durable_agents.storage.listener) on
durable_agents.storage.device_calls.CALLS_CHANNEL.

A call becomes pending (offered by the cloud's offer_device_call, or released after a
refused result) in one gateway-independent place, PostgreSQL, and its NOTIFY names the
(tenant, device) only; whichever gateway holds that device's poll wakes it and the poll
leases the call from the table. No process keeps anything per device beyond its open
polls, so any gateway serves any device. When the listener is listening again after a
lost connection it wakes every poll (each re-reads the table); polls re-read on their own
every few seconds anyway (a lease that ran out notifies nobody).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from durable_agents.storage.device_calls import CALLS_CHANNEL, parse_wake
from durable_agents.storage.listener import Listener


class DeviceWakes:
    def __init__(self, listener: Listener) -> None:
        self._listener = listener
        self._waiting: dict[tuple[str, str], set[asyncio.Event]] = {}
        self.notifications = 0
        listener.subscribe({CALLS_CHANNEL: self._on_notify}, missed=self._wake_all)

    async def ensure_started(self) -> None:
        """Listen from the first poll on (a process no device polls holds no connection).
        A database that cannot be reached leaves polls to their re-reads."""
        await self._listener.start()

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

    def _on_notify(self, payload: str) -> None:
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
