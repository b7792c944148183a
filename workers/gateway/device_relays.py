"""The gateway's relays, for runs from before dispatch only (GATEWAY_DEVICE_QUEUE_RELAYS):
one Temporal worker on a device's queue while that device is connected, serving run_tool
by handing each call over (activities/device_relay.py). New runs dispatch device calls
through offer_device_call on the cloud queue and need none of this.

A relay starts with the device's first poll and stops once the device has not polled for
RELAY_IDLE: an absent device then has no poller, so its calls meet the workflow's
schedule-to-start timeout (DeviceOffline, the model is told) exactly as before. Each relay
also keeps an event its device's long-polls wait on, set when a call is handed over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client
from temporalio.worker import Worker

from durable_agents.activities.device_relay import DeviceRelayActivities
from durable_agents.workers.process.plugin import AgentPlugin
from durable_agents.workflows.policies import device_task_queue

logger = logging.getLogger(__name__)

# Matches storage.devices.ONLINE_WITHIN: a relay outlives its device by what presence allows.
RELAY_IDLE_SECONDS = 30.0
_REAP_EVERY_SECONDS = 5.0


@dataclass
class _Relay:
    worker: Worker
    task: asyncio.Task[None]
    offered: asyncio.Event = field(default_factory=asyncio.Event)
    last_poll: float = field(default_factory=time.monotonic)


class DeviceRelays:
    """Relays of the devices polling this gateway process, by (tenant, device)."""

    def __init__(
        self,
        client: Client,
        sessions: async_sessionmaker[AsyncSession],
        *,
        store_prefix: str,
        idle_seconds: float = RELAY_IDLE_SECONDS,
    ) -> None:
        self._client = client
        self._sessions = sessions
        self._store_prefix = store_prefix
        self._idle = idle_seconds
        self._relays: dict[tuple[str, str], _Relay] = {}
        self._reaper: asyncio.Task[None] | None = None

    def polled(self, tenant_id: str, device_id: str) -> asyncio.Event:
        """The device is polling: make sure its relay serves; the event its polls wait on."""
        relay = self._relays.get((tenant_id, device_id))
        if relay is not None and relay.task.done():
            # Its worker stopped on its own (Temporal was unreachable): start a new one.
            logger.warning(
                "relay for device %s of %s had stopped; restarting", device_id, tenant_id
            )
            self._relays.pop((tenant_id, device_id))
            relay = None
        if relay is None:
            relay = self._start(tenant_id, device_id)
        relay.last_poll = time.monotonic()
        if self._reaper is None:
            self._reaper = asyncio.create_task(self._reap())
        return relay.offered

    def _start(self, tenant_id: str, device_id: str) -> _Relay:
        offered = asyncio.Event()
        acts = DeviceRelayActivities(
            self._sessions, tenant_id, device_id, offered.set, store_prefix=self._store_prefix
        )
        worker = Worker(
            self._client,
            task_queue=device_task_queue(tenant_id, device_id),
            plugins=[AgentPlugin([acts.run_tool], workflows=())],
        )
        relay = _Relay(worker, asyncio.create_task(worker.run()), offered)
        self._relays[(tenant_id, device_id)] = relay
        logger.info("relay for device %s of %s started", device_id, tenant_id)
        return relay

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(_REAP_EVERY_SECONDS)
            now = time.monotonic()
            idle = [k for k, r in self._relays.items() if now - r.last_poll > self._idle]
            for key in idle:
                await self._stop(key)

    async def _stop(self, key: tuple[str, str]) -> None:
        relay = self._relays.pop(key)
        try:
            await relay.worker.shutdown()
        except Exception:  # a worker that failed already: nothing left to stop
            logger.warning("relay for device %s did not stop cleanly", key[1], exc_info=True)
        await asyncio.gather(relay.task, return_exceptions=True)
        logger.info("relay for device %s of %s stopped", key[1], key[0])

    async def aclose(self) -> None:
        """Stop every relay (the gateway is shutting down)."""
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        for key in list(self._relays):
            await self._stop(key)
