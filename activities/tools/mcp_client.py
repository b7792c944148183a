"""One declared MCP server as a worker talks to it through the MCP SDK: its client
session, replaced when the transport breaks, its listing and its calls.

A call sends the run's idempotency key in the request's `_meta` as `idempotency_key`
(META_KEY): a server whose tool has effects can dedupe a retried call on it. A transport
failure (the server died, the connection was refused or dropped, a timeout) is a
TransientToolError in fixed words, so Temporal retries, and the broken session is replaced
on the next call.

Only McpToolsets (mcp_toolset.py) imports this module, and only for a worker that serves
MCP servers: the SDK it loads costs a process ~12 MiB.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta
from typing import Any

import httpx
from mcp import ClientSession, McpError, types
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client

from durable_agents.activities.tools.base import (
    ToolContext,
    ToolError,
    ToolOutput,
    TransientToolError,
)
from durable_agents.activities.tools.mcp_servers import (
    CONNECT_TIMEOUT_SECONDS,
    McpListingError,
    McpServer,
    McpStdio,
)
from durable_agents.activities.tools.mcp_tools import McpToolInfo, output_of
from durable_agents.activities.tools.tool_identity import RunAs, make_non_dumpable

logger = logging.getLogger(__name__)

# The `_meta` field a tools/call request carries the call's idempotency key in.
META_KEY = "idempotency_key"
# A server that pages its listing forever is cut off (MAX_TOOLS_PER_SERVER bounds the rest).
_MAX_LIST_PAGES = 16
# How long closing one server may take (stdio: stdin closed, then SIGTERM, then SIGKILL).
_CLOSE_TIMEOUT_SECONDS = 10.0
# JSON-RPC error codes that mean the session, not the call, is gone: closed connection,
# an HTTP server that forgot our session (restarted).
_SESSION_GONE = {types.CONNECTION_CLOSED, 32600}
# The SDK's code for a call that outlived its read timeout: worth retrying, but the session
# may be serving other calls, so it is kept.
_TIMED_OUT = 408


class _Connection:
    """One live client session. The SDK's transports are anyio task groups that must be
    entered and left by one task, so a task of its own holds them open until closed."""

    def __init__(self, server: McpServer, run_as: RunAs | None) -> None:
        self._server = server
        self._run_as = run_as
        self._closing = asyncio.Event()
        self._ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        # A failed connect nobody asked for again is not worth an asyncio warning.
        self._ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._task = asyncio.create_task(self._hold(), name=f"mcp-{server.name}")

    @property
    def alive(self) -> bool:
        return not self._task.done() and not self._closing.is_set()

    async def session(self) -> ClientSession:
        """The initialized session; raises what connecting raised."""
        async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
            return await asyncio.shield(self._ready)

    async def _hold(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(
                    _transport(self._server, self._run_as)
                )
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                self._ready.set_result(session)
                await self._closing.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(
                    exc if isinstance(exc, Exception) else ConnectionError("cancelled")
                )
            if not isinstance(exc, Exception):
                raise
            if not self._closing.is_set():
                logger.warning(
                    "MCP server %s: connection ended (%s)", self._server.name, type(exc).__name__
                )

    async def call(self, name: str, arguments: dict[str, Any], key: str) -> types.CallToolResult:
        """tools/call; a session that ends while the call waits ends the wait too."""
        session = await self.session()
        call = asyncio.ensure_future(
            session.call_tool(
                name,
                arguments,
                read_timeout_seconds=timedelta(seconds=self._server.call_timeout_seconds),
                meta={META_KEY: key},
            )
        )
        try:
            await asyncio.wait({call, self._task}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            call.cancel()
            raise
        if not call.done():
            call.cancel()
            raise ConnectionError("the session ended during the call")
        return call.result()

    async def close(self) -> None:
        self._closing.set()
        try:
            async with asyncio.timeout(_CLOSE_TIMEOUT_SECONDS):
                await asyncio.gather(self._task, return_exceptions=True)
        except TimeoutError:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


@asynccontextmanager
async def _transport(server: McpServer, run_as: RunAs | None) -> AsyncIterator[tuple[Any, Any]]:
    """The read and write streams of a new connection to `server` (a stdio server
    spawned as `run_as`, or as the worker's own user when None)."""
    if isinstance(server, McpStdio):
        command, args, env = server.command, list(server.args), dict(server.env)
        if run_as is not None:
            command, args = run_as.argv(command, args)
            env = run_as.env(env)
        params = StdioServerParameters(command=command, args=args, env=env, cwd=server.cwd)
        async with stdio_client(params) as (read, write):
            yield read, write
        return
    # Our own client, so that the declaration's headers go with every request; the SDK's
    # transport follows redirects only within the server's origin.
    timeout = httpx.Timeout(CONNECT_TIMEOUT_SECONDS, read=server.call_timeout_seconds)
    async with (
        httpx.AsyncClient(headers=dict(server.headers), timeout=timeout) as http,
        streamable_http_client(server.url, http_client=http) as (read, write, _),
    ):
        yield read, write


def _transport_failure(exc: BaseException) -> bool:
    """Whether `exc` says the connection is broken (retry on a new one), not the call."""
    if isinstance(exc, McpError):
        return exc.error.code in _SESSION_GONE or exc.error.code == _TIMED_OUT
    transport = (ConnectionError, OSError, TimeoutError, httpx.HTTPError, EOFError)
    if isinstance(exc, transport):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return any(_transport_failure(e) for e in exc.exceptions)
    # anyio's closed and broken stream errors, without importing anyio's internals by name.
    return type(exc).__module__.startswith("anyio")


class McpServerClient:
    """One declared server: its current connection, replaced when it breaks. A stdio
    server is spawned as `run_as` (tool_identity.py), or as the worker's user when None."""

    def __init__(self, server: McpServer, run_as: RunAs | None = None) -> None:
        self.decl = server
        self.run_as = run_as
        self._lock = asyncio.Lock()
        self._conn: _Connection | None = None

    async def connection(self) -> _Connection:
        async with self._lock:
            if self._conn is None or not self._conn.alive:
                if self._conn is not None:
                    await self._conn.close()
                self._conn = _Connection(self.decl, self.run_as)
            return self._conn

    async def prepare(self) -> None:
        """Before the first spawn of a stdio server: close this process's memory to it,
        and, as another user, check that user can run its command (ToolIdentityError)."""
        if not isinstance(self.decl, McpStdio):
            return
        make_non_dumpable()
        if self.run_as is not None:
            env = {**get_default_environment(), **self.run_as.env(self.decl.env)}
            what = f"MCP server {self.decl.name!r}"
            await self.run_as.check_reaches(what, self.decl.command, self.decl.cwd, env)

    async def list_tools(self) -> list[types.Tool]:
        session = await (await self.connection()).session()
        listed: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_LIST_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            listed.extend(page.tools)
            cursor = page.nextCursor
            if not cursor:
                return listed
        raise McpListingError(f"MCP server {self.decl.name!r} pages its tool list without end")

    async def call(self, info: McpToolInfo, ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        conn: _Connection | None = None
        try:
            conn = await self.connection()
            result = await conn.call(info.mcp_name, args, ctx.idempotency_key)
        except Exception as exc:
            if not _transport_failure(exc):
                raise _call_error(self.decl.name, exc) from None
            timed_out = isinstance(exc, McpError) and exc.error.code == _TIMED_OUT
            if conn is not None and not timed_out:
                await conn.close()  # the next attempt connects afresh
            logger.warning("MCP server %s: call failed (%s)", self.decl.name, type(exc).__name__)
            # Fixed words: this message is recorded in workflow history.
            what = "timed out" if timed_out else "unreachable"
            raise TransientToolError(
                f"MCP server {self.decl.name} {what} ({type(exc).__name__})"
            ) from None
        return output_of(self.decl.name, result)

    async def close(self) -> None:
        async with self._lock:
            if self._conn is not None:
                await self._conn.close()
                self._conn = None


def _call_error(server: str, exc: Exception) -> Exception:
    """What to raise for a call the server refused (unknown tool, bad params) or answered
    badly: a ToolError the model is told of; retrying would get the same answer."""
    if isinstance(exc, McpError):
        message = exc.error.message[:500]
        return ToolError("McpError", f"MCP server {server!r} refused the call: {message}")
    if isinstance(exc, RuntimeError | ValueError):
        # The SDK's check of structured content against the tool's output schema.
        return ToolError(
            "McpBadResult", f"MCP server {server!r} sent a result its tool does not promise"
        )
    return exc  # ours (ToolError) or unknown: run_tool words it for history
