"""MCP toolsets on a worker: one client per declared server, tools listed once.

    async with McpToolsets(servers) as toolsets:
        registry = ToolRegistry.of([*my_tools, *toolsets.tools()])

Each server's tools are listed when the toolsets open and kept for the worker's life: the
specs are part of the context config a turn records, so a server deployed with other
tools changes the fingerprint of turns started after the worker restarts, not mid-turn.
How one server is talked to (sessions, calls, transport failures) is mcp_client.py; it is
imported only when there is a server to talk to, so a worker that serves none never
loads the MCP SDK.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from durable_agents.activities.tools.base import Tool, ToolContext, ToolOutput
from durable_agents.activities.tools.mcp_servers import (
    CONNECT_TIMEOUT_SECONDS,
    McpListingError,
    McpServer,
    McpStdio,
    check_unique,
)
from durable_agents.activities.tools.tool_identity import ToolIdentityError, tool_identity

if TYPE_CHECKING:
    from durable_agents.activities.tools.mcp_client import McpServerClient
    from durable_agents.activities.tools.mcp_tools import McpToolInfo
    from durable_agents.activities.tools.tool_identity import RunAs


class McpToolsets:
    """The MCP servers one worker serves tools of; an async context manager.

    `device=False` (cloud): device-local stdio servers are not started here (their device
    worker runs them). `device=True`: only the device-local ones are.
    `tool_user` (AGENT_TOOL_USER): the user stdio servers run as when the worker is root
    and their declaration names none (default `nobody`); tool_identity.py says why. The
    process that starts a stdio server is made non-dumpable first.
    """

    def __init__(
        self, servers: Sequence[McpServer], *, device: bool = False, tool_user: str | None = None
    ) -> None:
        check_unique(list(servers))
        mine = [s for s in servers if s.device_local == device]
        self._servers: list[McpServerClient] = []
        if mine:
            from durable_agents.activities.tools.mcp_client import McpServerClient

            self._servers = [
                McpServerClient(s, _run_as(s, tool_user) if isinstance(s, McpStdio) else None)
                for s in mine
            ]
        self._tools: list[Tool] = []
        self._infos: list[McpToolInfo] = []

    async def __aenter__(self) -> McpToolsets:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Connect to every server and list its tools; a server that cannot be reached or
        lists tools we refuse fails the start, naming the server."""
        if not self._servers:
            return
        from durable_agents.activities.tools.mcp_tools import tool_infos

        try:
            for server in self._servers:
                try:
                    async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                        await server.prepare()
                        listed = await server.list_tools()
                except (McpListingError, ToolIdentityError):
                    raise
                except Exception as exc:
                    raise McpListingError(
                        f"MCP server {server.decl.name!r}: could not list its tools "
                        f"({type(exc).__name__})"
                    ) from exc
                infos = tool_infos(server.decl, listed)
                self._infos.extend(infos)
                self._tools.extend(_tool(server, info) for info in infos)
            names = [t.spec.name for t in self._tools]
            if len(set(names)) != len(names):
                raise McpListingError("two MCP tools of different servers have the same name")
        except BaseException:
            await self.aclose()
            raise

    def tools(self) -> list[Tool]:
        """Every MCP tool as a Tool, in declaration and listing order."""
        return list(self._tools)

    def by_server(self) -> dict[str, list[Tool]]:
        """The tools of each server, by server name."""
        grouped: dict[str, list[Tool]] = {}
        for tool, info in zip(self._tools, self._infos, strict=True):
            grouped.setdefault(info.server, []).append(tool)
        return grouped

    def infos(self) -> list[McpToolInfo]:
        """What each tool is on its server (name, effect), for listings and devices."""
        return list(self._infos)

    async def aclose(self) -> None:
        """Close every session (stdio servers exit); safe to call twice."""
        await asyncio.gather(*(s.close() for s in self._servers), return_exceptions=True)


def _run_as(server: McpStdio, tool_user: str | None) -> RunAs | None:
    return tool_identity(server.run_as or tool_user, f"MCP server {server.name!r}")


def _tool(server: McpServerClient, info: McpToolInfo) -> Tool:
    async def run(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        return await server.call(info, ctx, args)

    return Tool(spec=info.spec, fn=run, effect=info.effect, policy_names=info.policy_names)
