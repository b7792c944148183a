"""A pass-through proxy in front of llama-server that times each Chat Completions request and
keeps the server's own `timings` (prompt and generation tokens and milliseconds).

The provider streams its requests (Server-Sent Events), so the proxy relays a streamed reply
chunk by chunk as it arrives (the worker's token deltas and heartbeats go on as without it)
and reads llama.cpp's `timings` from the chunks; a whole JSON reply is relayed as it is. It
never answers for the server: whatever it cannot read is still passed through unchanged.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web

# Headers of the request that reach the server (the rest are hop-by-hop or the proxy's).
_FORWARDED = ("Content-Type", "Authorization", "Idempotency-Key", "Accept")


@dataclass
class Timed:
    """The model requests of one run, as the proxy saw them."""

    wall: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    prompt_ms: float = 0.0
    predicted_tokens: int = 0
    predicted_ms: float = 0.0
    # Replies whose timings could not be read (relayed all the same).
    unread: int = 0
    # Each request's body and the reply's bytes as the server sent them (a stream's events
    # too): what the model wrote, before any reading of ours.
    exchanges: list[tuple[bytes, bytes]] = field(default_factory=list)

    def add(self, timings: dict[str, Any] | None) -> None:
        if not timings:
            self.unread += 1
            return
        self.prompt_tokens += int(timings.get("prompt_n", 0))
        self.prompt_ms += float(timings.get("prompt_ms", 0.0))
        self.predicted_tokens += int(timings.get("predicted_n", 0))
        self.predicted_ms += float(timings.get("predicted_ms", 0.0))


class TimingProxy:
    """Forwards Chat Completions to llama-server unchanged, timing each request."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.current = Timed()
        self.url = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k in _FORWARDED if (v := request.headers.get(k))}
        began = time.monotonic()
        # No client timeout: a CPU model's reply can take minutes, and the provider has its own.
        async with (
            ClientSession(timeout=ClientTimeout(total=None)) as http,
            http.post(f"{self.upstream}/chat/completions", data=body, headers=headers) as reply,
        ):
            kind = reply.headers.get("Content-Type", "application/json")
            try:
                if reply.status == 200 and kind.startswith("text/event-stream"):
                    relayed, timings, raw = await _relay_stream(request, reply)
                    self.current.add(timings)
                    self.current.exchanges.append((body, raw))
                    return relayed
                payload = await reply.read()
            finally:
                self.current.wall.append(time.monotonic() - began)
        self.current.exchanges.append((body, payload))
        if reply.status == 200:
            self.current.add(_timings_of(payload))
        return web.Response(body=payload, status=reply.status, headers={"Content-Type": kind})


async def _relay_stream(
    request: web.Request, reply: Any
) -> tuple[web.StreamResponse, dict[str, Any] | None, bytes]:
    """Relay the server's events as they come; the last `timings` any chunk carried, and
    the events' bytes."""
    response = web.StreamResponse(
        status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    timings: dict[str, Any] | None = None
    pending = b""
    raw = bytearray()
    async for piece in reply.content.iter_any():
        raw += piece
        await response.write(piece)
        lines = (pending + piece).split(b"\n")
        pending = lines.pop()
        for line in lines:
            timings = _timings_of_event(line) or timings
    timings = _timings_of_event(pending) or timings
    await response.write_eof()
    return response, timings, bytes(raw)


def _timings_of_event(line: bytes) -> dict[str, Any] | None:
    line = line.strip()
    if not line.startswith(b"data:"):
        return None
    return _timings_of(line[5:].strip())


def _timings_of(payload: bytes) -> dict[str, Any] | None:
    """llama.cpp's `timings` object in a reply or chunk, or None (not JSON, [DONE], absent)."""
    try:
        value = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    timings = value.get("timings") if isinstance(value, dict) else None
    return timings if isinstance(timings, dict) else None


@asynccontextmanager
async def serving(proxy: TimingProxy) -> AsyncIterator[None]:
    """Serve `proxy` on a free loopback port; its `url` is set while this runs."""
    app = web.Application()
    app.router.add_post("/v1/chat/completions", proxy.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    proxy.url = f"http://127.0.0.1:{port}/v1"
    try:
        yield
    finally:
        await runner.cleanup()
