"""The long requests a key holds open in this process (event streams, device long-polls):
capped per key, and ended once the key is revoked or expires.

A key is checked when a request authenticates; a stream outlives that check by hours. So
while any hold is open, one task per process asks the key table every `recheck_seconds`
which of the held keys are still valid (one primary-key read for all of them, however many
streams) and sets `Hold.ended` of the others: their streams and polls end within that
period plus the poll's own wake-up. A database that cannot be reached ends nothing (the
next check decides); the caps are in-process, as the rate limits are.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.storage.api_keys import ApiKeyRepository
from durable_agents.workers.gateway.errors import ApiError

logger = logging.getLogger(__name__)

STREAM, POLL = "event streams", "device long-polls"
# What a client refused for a cap is told to wait: long enough for a stream to close.
CAP_RETRY_AFTER_SECONDS = 5
T = TypeVar("T")


@dataclass(eq=False)
class Hold:
    """One open long request of a key; `ended` is set once the key is no longer valid."""

    key_id: str
    kind: str
    _owner: OpenHolds
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    _released: bool = False

    def release(self) -> None:
        """The request is over (idempotent)."""
        if not self._released:
            self._released = True
            self._owner._release(self)


class OpenHolds:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        caps: Mapping[str, int],
        *,
        recheck_seconds: float,
    ) -> None:
        self._sessions = sessions
        self._caps = dict(caps)
        self._recheck = recheck_seconds
        self._holds: dict[str, set[Hold]] = {}
        self._watcher: asyncio.Task[None] | None = None

    def acquire(self, key_id: str, kind: str) -> Hold:
        """A hold for one more `kind` request of the key; 429 past the key's cap."""
        cap = self._caps[kind]
        held = self._holds.setdefault(key_id, set())
        if sum(1 for h in held if h.kind == kind) >= cap:
            raise ApiError(
                429,
                "too_many_open",
                f"this key has {cap} open {kind} already (the most it may hold); "
                "close one or retry later",
                headers={"Retry-After": str(CAP_RETRY_AFTER_SECONDS)},
            )
        hold = Hold(key_id, kind, self)
        held.add(hold)
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.create_task(self._watch())
        return hold

    def open_count(self, key_id: str, kind: str) -> int:
        return sum(1 for h in self._holds.get(key_id, ()) if h.kind == kind)

    def _release(self, hold: Hold) -> None:
        held = self._holds.get(hold.key_id)
        if held is not None:
            held.discard(hold)
            if not held:
                del self._holds[hold.key_id]

    async def _watch(self) -> None:
        while self._holds:
            await asyncio.sleep(self._recheck)
            await self.check()

    async def check(self) -> None:
        """Look at every held key once; end the holds of those no longer valid."""
        keys = list(self._holds)
        if not keys:
            return
        try:
            async with self._sessions() as db:
                valid = await ApiKeyRepository(db).still_valid(keys)
        except Exception:  # the store is unreachable: end nothing, the next check decides
            logger.warning("could not re-check the keys of open streams", exc_info=True)
            return
        for key_id in keys:
            if key_id not in valid:
                for hold in self._holds.get(key_id, ()):
                    hold.ended.set()

    async def aclose(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher


async def until_ended(stream: AsyncIterator[T], ended: asyncio.Event) -> AsyncIterator[T]:
    """The items of `stream` until it ends or `ended` is set, whichever is first (a
    stream waiting for its next item is cancelled then, as it is when this is)."""
    stop = asyncio.ensure_future(ended.wait())
    step: asyncio.Future[T] | None = None
    try:
        while True:
            step = asyncio.ensure_future(anext(stream))
            await asyncio.wait({step, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not step.done():
                return
            try:
                item = step.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        stop.cancel()
        if step is not None and not step.done():
            # Never left running: the stream is closed next, which it must not be mid-step.
            step.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await step
