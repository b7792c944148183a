"""Heartbeat while a long awaitable runs, so a dead worker is noticed within the
heartbeat timeout rather than the whole start-to-close timeout, and a cancel reaches the
awaitable (a model's HTTP request, closed by its cancellation) within the worker's heartbeat
throttle (workers/process/cloud.py) rather than a beat interval later."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from temporalio import activity

# After the first beat: the SDK only sends a beat to the server once per throttle interval
# and answers it with a pending cancel, so beating often costs nothing and lets a short
# throttle deliver a cancel promptly.
FOLLOWING_BEATS_SECONDS = 0.25


@asynccontextmanager
async def heartbeating(every_seconds: float = 2.0) -> AsyncIterator[None]:
    info = activity.info()
    if not info.heartbeat_timeout:
        yield
        return
    interval = min(every_seconds, info.heartbeat_timeout.total_seconds() / 3)

    async def beat() -> None:
        # The server's heartbeat clock starts with the activity, so a beat at t=0 would notice
        # nothing sooner; it would only cost a billable action (Temporal Cloud bills every
        # heartbeat that reaches the server), two per agent step. First beat one interval in.
        await asyncio.sleep(interval)
        while True:
            activity.heartbeat()
            await asyncio.sleep(min(interval, FOLLOWING_BEATS_SECONDS))

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
