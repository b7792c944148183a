"""The Server-Sent Events clients of bench/sse_fanout.py, in processes of their own so the
clients' parsing never delays the writer that timestamps each commit.

Plain HTTP/1.0 on asyncio streams (the response is framed by the connection's end, no
chunked encoding): far lighter than an HTTP library per event, so the process measures the
gateway, not itself. Each received item is recorded as (ordinal, wall-clock time); the wall
clock is shared by every process of the machine.
"""

from __future__ import annotations

import asyncio
import time
from multiprocessing.connection import Connection

Seen = list[tuple[int, float]]


async def _follow(
    port: int, key: str, sid: str, seen: Seen, ready: asyncio.Event, reconnects: list[int]
) -> None:
    """Follow one session to its `end`; a stream closed before it is opened again with
    Last-Event-ID, as a browser's or agentctl's client does (counted in `reconnects`)."""
    last_id = b""
    while True:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
        resume = f"Last-Event-ID: {last_id.decode()}\r\n" if last_id else ""
        writer.write(
            f"GET /v1/sessions/{sid}/events HTTP/1.0\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {key}\r\nAccept: text/event-stream\r\n{resume}\r\n".encode()
        )
        try:
            status = await reader.readline()
            if b" 200 " not in status:
                raise RuntimeError(f"the gateway answered {status[:60]!r}")
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass  # the response's headers
            event, ident = b"", b""
            while line := await reader.readline():
                line = line.rstrip(b"\r\n")
                if line:
                    field, _, value = line.partition(b":")
                    if field == b"event":
                        event = value.strip()
                    elif field == b"id":
                        ident = value.strip()
                    continue
                if event == b"item":
                    seen.append((int(ident), time.time()))
                    last_id = ident
                elif event == b"status":
                    ready.set()
                elif event == b"end":
                    return
                event = b""
        finally:
            writer.close()
        reconnects[0] += 1


async def _run(port: int, key: str, sids: list[str], conn: Connection) -> None:
    seen: list[Seen] = [[] for _ in sids]
    readies = [asyncio.Event() for _ in sids]
    reconnects = [0]
    clients = [
        asyncio.create_task(_follow(port, key, sid, seen[i], readies[i], reconnects))
        for i, sid in enumerate(sids)
    ]
    async with asyncio.timeout(120):
        await asyncio.gather(*(r.wait() for r in readies))
    conn.send("ready")
    done = await asyncio.gather(*clients, return_exceptions=True)
    errors = sum(1 for d in done if isinstance(d, BaseException))
    conn.send((seen, errors, reconnects[0]))


def run(port: int, key: str, sids: list[str], conn: Connection) -> None:
    """A client process: one stream per entry of `sids`; sends "ready" once every stream
    has its first event, then (what each stream saw, how many failed, how many times
    streams were opened again) once all ended."""
    asyncio.run(_run(port, key, sids, conn))
