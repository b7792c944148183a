"""A gateway app served over real HTTP (uvicorn on loopback) and a Server-Sent Events reader."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import uvicorn


async def serve(app: Any) -> tuple[uvicorn.Server, asyncio.Task[None], str]:
    """The app under uvicorn on a loopback socket that is listening before this returns
    (connections wait in its backlog until the server accepts them)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    return server, task, f"http://127.0.0.1:{sock.getsockname()[1]}"


async def sse_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """Server-Sent Events as dicts {id?, event, data}; comments (heartbeats) skipped."""
    event: dict[str, Any] = {}
    async for line in response.aiter_lines():
        if not line:
            if event:
                yield event
            event = {}
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            event[field] = value.removeprefix(" ")
