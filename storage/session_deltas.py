"""Token deltas of the model call in flight, over PostgreSQL NOTIFY on their own channel.

Ephemeral, unlike the items of storage/session_events.py: nothing is stored, a listener that
is not listening misses them, and the committed assistant item is the record that replaces
them. A worker publishes through one connection per process (DeltaPublisher), opened on
first use; the gateway's EventHub LISTENs to DELTA_CHANNEL next to CHANNEL. A delta is sent
before the item it previews commits, and NOTIFYs are delivered in commit order, so a
listener hears a step's deltas before its assistant item.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

DELTA_CHANNEL = "agent_deltas"
# PostgreSQL refuses a NOTIFY payload of 8000 bytes or more; stay well under it.
MAX_PAYLOAD_BYTES = 7000
# A worker must not wait on a database that does not answer: deltas are only a preview.
# Connecting, and each batch of NOTIFYs, gives up after this long.
CONNECT_TIMEOUT_SECONDS = 2.0

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delta:
    """A piece of the reply text of one model request: `attempt` is the activity attempt,
    `send` the request within it (re-sent after a context overflow), `seq` its place."""

    tenant_id: str
    session_id: str
    step: int
    attempt: int
    send: int
    seq: int
    text: str

    def data(self) -> dict[str, Any]:
        """The delta as clients read it (the SSE `delta` event's data)."""
        return {
            "step": self.step,
            "attempt": self.attempt,
            "send": self.send,
            "seq": self.seq,
            "text": self.text,
        }


def encode_deltas(first: Delta) -> list[str]:
    """NOTIFY payloads for `first.text`, split so that each stays under MAX_PAYLOAD_BYTES;
    the pieces take seq `first.seq`, `first.seq + 1`, ..."""
    whole = _encode(first, first.text, first.seq)
    if len(whole.encode()) <= MAX_PAYLOAD_BYTES:
        return [whole] if first.text else []
    head = _encode(first, "", 10**15)  # room for seq's digits, however many pieces
    room = MAX_PAYLOAD_BYTES - len(head.encode())
    if room < 64:
        raise ValueError("tenant or session id too long for a delta")
    payloads: list[str] = []
    piece: list[str] = []
    used = 0
    seq = first.seq
    for char in first.text:
        # The char as it will be in the JSON (escapes included), in UTF-8 bytes.
        cost = len(json.dumps(char, ensure_ascii=False).encode()) - 2
        if used + cost > room:
            payloads.append(_encode(first, "".join(piece), seq))
            seq += 1
            piece, used = [], 0
        piece.append(char)
        used += cost
    if piece:
        payloads.append(_encode(first, "".join(piece), seq))
    return payloads


def _encode(delta: Delta, text: str, seq: int | None = None) -> str:
    data = {"t": delta.tenant_id, "s": delta.session_id, **delta.data(), "text": text}
    if seq is not None:
        data["seq"] = seq
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def parse_delta(payload: str) -> Delta | None:
    """The delta a notification carries; None for anything else on the channel."""
    try:
        data = json.loads(payload)
        fields = (data["step"], data["attempt"], data["send"], data["seq"])
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in fields):
            return None
        if not isinstance(data["text"], str):
            return None
        return Delta(str(data["t"]), str(data["s"]), *fields, data["text"])
    except (ValueError, KeyError, TypeError):
        return None


class DeltaPublisher:
    """Sends delta payloads through one connection, opened on first use; never raises."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn: Any = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._warned = False
        # Counters for tests and benchmarks.
        self.notifies = 0
        self.failures = 0

    async def publish(self, payloads: Sequence[str]) -> bool:
        """NOTIFY each payload, in order, in one round trip. False when it failed (logged
        once per publisher, without the payload); the next call tries a new connection."""
        if not payloads or self._closed:
            return not self._closed
        try:
            async with self._lock:
                if self._conn is None or self._conn.is_closed():
                    self._conn = await asyncpg.connect(self._dsn, timeout=CONNECT_TIMEOUT_SECONDS)
                await self._conn.executemany(
                    "SELECT pg_notify($1, $2)",
                    [(DELTA_CHANNEL, p) for p in payloads],
                    # A stalled connection must not hold every later delta (and flush) up.
                    timeout=CONNECT_TIMEOUT_SECONDS,
                )
                self.notifies += len(payloads)
            return True
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as err:
            self.failures += 1
            if not self._warned:
                self._warned = True
                logger.warning(
                    "token deltas not published (%s); model calls go on", type(err).__name__
                )
            await self._drop()
            return False

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            conn.terminate()

    async def aclose(self) -> None:
        """Close the connection; later publishes do nothing."""
        self._closed = True
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None and not conn.is_closed():
                await conn.close()
