"""Device-local MCP tools as the cloud sees them: from the specs the device registered.

A device-local stdio server runs on the device (its worker spawns it); the cloud never
starts it. The device worker registers each tool's spec in AgentState (devices.tool_specs)
and the cloud builds stand-ins from them: the model sees the same names and schemas, the
approval policies match the same `server.tool` keys, and the loop sends the calls to the
device's queue (the task names the device and lists the tools among its device tools).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from mcp import types
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.activities.tools.base import Tool, ToolContext, ToolError, ToolOutput
from durable_agents.activities.tools.mcp_servers import McpListingError, McpStdio
from durable_agents.activities.tools.mcp_tools import McpToolInfo, tool_infos
from durable_agents.storage.agent_state import agent_state


def _infos(records: list[dict[str, Any]]) -> list[McpToolInfo]:
    """The registered tools, re-checked as a server's listing is: what a device wrote is
    no more trusted than what its server sent."""
    by_server: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if not isinstance(record, dict) or not isinstance(record.get("server"), str):
            raise McpListingError("a device registered a malformed MCP tool spec")
        by_server.setdefault(record["server"], []).append(record)
    infos: list[McpToolInfo] = []
    for server, listed in by_server.items():
        try:
            tools = [
                types.Tool(
                    name=r["mcp_name"],
                    description=r.get("description"),
                    inputSchema=r["parameters"],
                )
                for r in listed
            ]
            effects = {r["mcp_name"]: r["effect"] for r in listed}
            decl = McpStdio(server, "(on the device)", device_local=True, effects=effects)
        except (KeyError, TypeError, ValueError):  # pydantic's ValidationError too
            raise McpListingError(
                f"a device registered a malformed spec for MCP server {server[:32]!r}"
            ) from None
        infos.extend(tool_infos(decl, tools))
    return infos


def device_mcp_tools(records: list[dict[str, Any]] | None) -> list[Tool]:
    """Cloud stand-ins for the MCP tools a device registered (DeviceRow.tool_specs)."""
    return [_stand_in(info) for info in _infos(list(records or []))]


async def registered_device_tools(
    sessions: async_sessionmaker[AsyncSession],
    tenant_id: str,
    device_id: str,
    servers: Collection[str] | None = None,
) -> list[Tool]:
    """Stand-ins for the MCP tools the tenant's device serves (of `servers` only, when
    given); none if it never registered."""
    async with agent_state(sessions, tenant_id) as st:
        row = await st.devices.get(device_id)
    records = list(row.tool_specs or []) if row is not None else []
    if servers is not None:
        records = [r for r in records if isinstance(r, dict) and r.get("server") in servers]
    return device_mcp_tools(records)


def _stand_in(info: McpToolInfo) -> Tool:
    async def on_the_cloud(ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        # Reached only when a task calls it without naming the device that serves it.
        raise ToolError(
            "DeviceOnly",
            f"{info.spec.name} runs on the device that serves MCP server {info.server!r}; "
            "this task was not started on that device",
        )

    return Tool(spec=info.spec, fn=on_the_cloud, effect=info.effect, policy_names=info.policy_names)
