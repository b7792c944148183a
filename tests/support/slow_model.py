"""A Chat Completions server on loopback that never finishes a reply: a model generating
slowly (llama-server on 2 cores). A POST to /v1/chat/completions is answered with a text
chunk every `pause` seconds, streamed or (unstreamed) with nothing at all, until the client
goes away; the server notes when it saw each connection close, as llama-server stops
generating when its client disconnects. Anything else is a 404 (no /props: not llama.cpp).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"connection: close\r\n\r\n"
)


class SlowModel:
    def __init__(self, pause: float = 0.2) -> None:
        self.pause = pause
        self.generating = asyncio.Event()  # set when a chat completion has begun
        self.closed_at: list[float] = []  # time.monotonic() of each chat client's close
        self.closed = asyncio.Event()  # set at the first

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Cancelled: the test is over and the server closing (a client still connected).
        with contextlib.suppress(ConnectionError, asyncio.CancelledError, ValueError):
            head = (await reader.readuntil(b"\r\n\r\n")).decode()
            lines = head.split("\r\n")
            headers = {
                k.strip().lower(): v.strip()
                for k, _, v in (line.partition(":") for line in lines[1:] if line)
            }
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if not lines[0].startswith("POST ") or "/chat/completions" not in lines[0]:
                writer.write(_NOT_FOUND)
                await writer.drain()
                return
            streamed = bool(json.loads(body or b"{}").get("stream"))
            if streamed:
                writer.write(_STREAM_HEAD)
            self.generating.set()
            eof = asyncio.ensure_future(reader.read())  # b"": the client closed
            try:
                while not eof.done():
                    if streamed:
                        writer.write(_chunk("word "))
                        await writer.drain()
                    await asyncio.wait({eof}, timeout=self.pause)
                self.closed_at.append(time.monotonic())
                self.closed.set()
            finally:
                eof.cancel()
        writer.close()


def _chunk(text: str) -> bytes:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": None}
    chunk = {"id": "slow", "object": "chat.completion.chunk", "model": "slow", "choices": [choice]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


@asynccontextmanager
async def slow_model(pause: float = 0.2) -> AsyncIterator[tuple[SlowModel, str]]:
    """(server, its OpenAI-compatible /v1 root)."""
    model = SlowModel(pause)
    server = await asyncio.start_server(model._answer, "127.0.0.1", 0)
    try:
        yield model, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    finally:
        server.close()
