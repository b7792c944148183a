"""A scripted Server-Sent Events server on loopback: each connection is answered with the
next script's chunks, written one by one (a short pause between them, so the client reads
them as they come), then the connection is closed. For what the real gateway does not send
yet (token deltas) or sends only one way (its line endings, its comments)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"connection: close\r\n\r\n"
)


class ScriptedSse:
    def __init__(self, scripts: list[list[str]], pause: float = 0.05, head: bytes = HEAD) -> None:
        self.scripts = list(scripts)
        self.head = head
        self.pause = pause
        self.requests: list[dict[str, str]] = []  # each connection's request headers

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Cancelled: the test is over and the server closing (a client still connected).
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            head = (await reader.readuntil(b"\r\n\r\n")).decode()
            lines = head.split("\r\n")
            headers = {"": lines[0]} | {
                k.strip().lower(): v.strip()
                for k, _, v in (line.partition(":") for line in lines[1:] if line)
            }
            self.requests.append(headers)
            writer.write(self.head)
            for chunk in self.scripts.pop(0) if self.scripts else []:
                writer.write(chunk.encode())
                await writer.drain()
                await asyncio.sleep(self.pause)
        writer.close()


@asynccontextmanager
async def scripted_sse(
    scripts: list[list[str]], head: bytes = HEAD
) -> AsyncIterator[tuple[ScriptedSse, str]]:
    """(server, its URL); connection n gets `head` (the status line and headers), then
    scripts[n]."""
    sse = ScriptedSse(scripts, head=head)
    server = await asyncio.start_server(sse._answer, "127.0.0.1", 0)
    try:
        yield sse, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
