"""The text sink of one model request: its pieces published as token deltas, coalesced.

A fast model sends a piece per token; a NOTIFY per token would load the database for a
preview. Pieces are buffered and sent together at most once per `interval` (about 20 per
second), by a background task, so the model call never waits on the database while the
reply streams; `flush()` sends the rest before the reply commits, waiting at most
`flush_timeout`. Publishing is best effort: after a failure the stream stops sending, and
the model call goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace

from durable_agents.storage.session_deltas import Delta, DeltaPublisher, encode_deltas

# At most this many NOTIFYs per second per request (more only when a burst of text is
# split to stay under the payload limit).
DEFAULT_INTERVAL_SECONDS = 0.05
FLUSH_TIMEOUT_SECONDS = 2.0

logger = logging.getLogger(__name__)
# Publishing tasks left behind by a flush that timed out: kept referenced until they end.
_stragglers: set[asyncio.Task[None]] = set()
_warned: set[str] = set()


def _warn_once(what: str) -> None:
    """Log a publishing problem once per process (never the text)."""
    if what not in _warned:
        _warned.add(what)
        logger.warning("token deltas: %s; model calls go on without them", what)


class DeltaStream:
    """Callable as a provider's `on_text`; one per request (step, attempt, send)."""

    def __init__(
        self,
        publisher: DeltaPublisher,
        tenant_id: str,
        session_id: str,
        *,
        step: int,
        attempt: int,
        send: int,
        interval: float = DEFAULT_INTERVAL_SECONDS,
        flush_timeout: float = FLUSH_TIMEOUT_SECONDS,
    ) -> None:
        self._publisher = publisher
        self._head = Delta(tenant_id, session_id, step, attempt, send, 0, "")
        self._interval = interval
        self._flush_timeout = flush_timeout
        self._buffer: list[str] = []
        self._seq = 0
        self._next_at = 0.0
        self._task: asyncio.Task[None] | None = None
        self._hurry = asyncio.Event()
        self._broken = False
        # Counters for tests and benchmarks.
        self.pieces = 0
        self.published = 0

    async def __call__(self, piece: str) -> None:
        """Take a piece of the reply; returns at once (publishing happens in the background)."""
        if self._broken or not piece:
            return
        self.pieces += 1
        self._buffer.append(piece)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def flush(self) -> None:
        """Publish what is buffered now; bounded by `flush_timeout`, never raises."""
        task = self._task
        if task is None:
            return
        self._hurry.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), self._flush_timeout)
        except TimeoutError:
            self._broken = True
            _stragglers.add(task)
            task.add_done_callback(_stragglers.discard)
            _warn_once("a flush timed out")
        except Exception as err:  # a preview must never fail the model call it previews
            self._broken = True
            _warn_once(f"publishing failed ({type(err).__name__})")

    async def _run(self) -> None:
        try:
            await self._send_buffered()
        finally:
            self._hurry.clear()  # a flush hurries what was buffered then, not what follows

    async def _send_buffered(self) -> None:
        loop = asyncio.get_running_loop()
        while self._buffer and not self._broken:
            wait = self._next_at - loop.time()
            if wait > 0 and not self._hurry.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._hurry.wait(), wait)
            text = "".join(self._buffer)
            self._buffer.clear()
            self._next_at = loop.time() + self._interval
            head = replace(self._head, seq=self._seq, text=text)
            payloads = encode_deltas(head)
            self._seq += len(payloads)
            if await self._publisher.publish(payloads):
                self.published += len(payloads)
            else:
                self._broken = True
