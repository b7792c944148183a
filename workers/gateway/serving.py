"""Serving the gateway inside a process that does other things (the demo, `agentctl dev up`,
tests): uvicorn on the caller's event loop, on a socket bound before it starts."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Generator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn

# Open event streams are cut after this on stop, rather than waited on for ever.
STOP_GRACE_SECONDS = 3


class _Embedded(uvicorn.Server):
    """A uvicorn server that leaves the process's signals to its owner: Ctrl-C stops the
    demo or the dev stack as a whole, not just the gateway inside it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


@asynccontextmanager
async def serving(app: Any, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve `app` until the block ends; yields its URL (port 0: a free one). Connections
    made before uvicorn is up wait in the socket's backlog."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as err:
        sock.close()
        raise OSError(f"cannot serve the gateway on {host}:{port}: {err.strerror}") from None
    bound = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, timeout_graceful_shutdown=STOP_GRACE_SECONDS
    )
    server = _Embedded(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://{f'[{host}]' if ':' in host else host}:{bound}"
    finally:
        server.should_exit = True
        await task
        sock.close()
