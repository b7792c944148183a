"""A TCP proxy on loopback whose connections a test can drop: what a restarted load
balancer, a NAT timeout or a lost Wi-Fi does to a long-lived HTTP stream or a database
connection. New connections can also be refused (a server restarting behind it) or held
unanswered (a server slow to come back)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.connections = 0  # accepted so far
        self.refusing = False  # new connections are cut at once
        self._admit = asyncio.Event()  # cleared: new connections wait, unanswered
        self._admit.set()
        self._open: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        await self._admit.wait()
        if self.refusing:
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._open |= {writer, up_writer}
        both = [
            asyncio.create_task(self._pipe(reader, up_writer)),
            asyncio.create_task(self._pipe(up_reader, writer)),
        ]
        self._tasks.update(both)
        await asyncio.gather(*both, return_exceptions=True)
        self._open -= {writer, up_writer}

    def hold(self) -> None:
        """New connections wait, unanswered, until release()."""
        self._admit.clear()

    def release(self) -> None:
        self._admit.set()

    def drop(self) -> int:
        """Cut every open connection, both ways; how many sockets were cut."""
        cut = len(self._open)
        for writer in list(self._open):
            # An abort, not a close: no orderly end, as when a network path dies.
            writer.transport.abort()
        self._open.clear()
        return cut


@asynccontextmanager
async def tcp_proxy(url: str) -> AsyncIterator[tuple[TcpProxy, str]]:
    """(proxy, its URL) in front of the scheme://host:port `url`."""
    parts = urlsplit(url)
    assert parts.hostname and parts.port
    proxy = TcpProxy(parts.hostname, parts.port)
    server = await asyncio.start_server(proxy._accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield proxy, f"http://127.0.0.1:{port}"
    finally:
        proxy.refusing = True  # a connection still held is cut, not forwarded
        proxy.release()
        proxy.drop()
        server.close()
        for task in proxy._tasks:
            task.cancel()
        await asyncio.gather(*proxy._tasks, return_exceptions=True)
