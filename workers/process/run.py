"""Long-running worker processes: the cloud worker and a device worker."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from durable_agents.activities.agents import DEFAULT_AGENT, Agent
from durable_agents.activities.providers.factory import build_provider
from durable_agents.activities.tool_run import ToolActivities
from durable_agents.activities.tools.base import Tool, ToolRegistry
from durable_agents.activities.tools.builtin import WORKFLOW_TOOLS, default_registry
from durable_agents.activities.tools.mcp_servers import McpServer
from durable_agents.activities.tools.mcp_toolset import McpToolsets
from durable_agents.activities.tools.tool_identity import make_non_dumpable
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.devices import validate_device_id
from durable_agents.storage.workspace_seed import check_seed
from durable_agents.workers.agent_loading import Providers, agents_from, servers_of
from durable_agents.workers.device.calls import LocalTools
from durable_agents.workers.device.link import DeviceLinkSettings, run_device_link
from durable_agents.workers.process.cloud import (
    build_cloud_worker,
    cloud_activities,
    deployment_config,
    running,
    worker_slots,
)
from durable_agents.workers.process.device_worker import build_device_worker
from durable_agents.workers.process.health_file import heartbeat
from durable_agents.workers.process.payload_offload import data_converter_with_offload
from durable_agents.workers.process.tracing import recorder_for
from durable_agents.workers.resources import open_resources
from durable_agents.workers.settings import Settings
from durable_agents.workers.temporal_client import connect_client

logger = logging.getLogger(__name__)

# How often a device worker bumps its last_seen_at; `devices` calls a device online for
# ONLINE_WITHIN (30 s), so a few missed beats do not flap it offline.
DEVICE_HEARTBEAT_SECONDS = 5.0


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def with_mcp(registry: ToolRegistry, mcp: Sequence[Tool]) -> ToolRegistry:
    """`registry` plus MCP tools; a name both have is refused, not shadowed."""
    clash = sorted({t.spec.name for t in mcp} & set(registry.tools))
    if clash:
        raise ValueError(f"MCP tool {clash[0]!r} has the name of another tool")
    return ToolRegistry.of([*registry.tools.values(), *mcp])


def _tools_of(servers: Sequence[McpServer], by_server: Mapping[str, list[Tool]]) -> list[Tool]:
    return [t for s in servers for t in by_server.get(s.name, [])]


async def run_cloud_worker(
    settings: Settings,
    stop: asyncio.Event | None = None,
    agents: Sequence[Agent] = (),
    *,
    ready: asyncio.Event | None = None,
    mcp_servers: Sequence[McpServer] = (),
) -> None:
    """Serve workflows and cloud activities until SIGINT/SIGTERM (or `stop` is set), for
    the default agent, the agents AGENT_DEFINITIONS names and `agents`. `ready` is set
    once the worker polls its task queue.

    MCP servers, the agents' toolsets and `mcp_servers` (whose tools join the default
    agent's), are connected and listed once before the worker polls, and closed after it
    stops; device-local ones are left to their device worker."""
    make_non_dumpable()  # its environment holds the credentials; tool_identity.py
    served = agents_from(settings.agent.definitions, agents)  # refused before connecting
    if settings.agent.workspace_seed is not None:
        check_seed(settings.agent.workspace_seed)  # so is a seed it could not copy
    servers = servers_of(served, mcp_servers)
    provider = build_provider(settings.model)
    providers = Providers(settings.model, provider)
    try:
        async with (
            open_resources(settings.database, settings.s3) as res,
            McpToolsets(servers, tool_user=settings.agent.tool_user) as toolsets,
        ):
            await res.store.ensure_bucket()
            # Oversized payloads go to the artifact store instead of failing the workflow.
            client = await connect_client(data_converter=data_converter_with_offload(res.store))
            recorder, tracer_provider = recorder_for(settings.telemetry, res)
            by_server = toolsets.by_server()
            acts = cloud_activities(
                settings,
                res,
                provider,
                with_mcp(default_registry(), _tools_of(mcp_servers, by_server)),
                recorder=recorder,
                agents=served,
                provider_for=providers.for_choice,
                toolset_tools=by_server,
            )
            worker = build_cloud_worker(
                client,
                acts,
                task_queue=settings.agent.task_queue,
                max_cached_workflows=settings.agent.max_cached_workflows,
                sandbox=settings.agent.workflow_sandbox,
                interceptors=recorder.interceptors(),
                plugins=recorder.plugins(),
                deployment=deployment_config(settings.agent),
                heartbeat_throttle_seconds=settings.agent.heartbeat_throttle_seconds,
                slots=worker_slots(settings.agent),
            )
            try:
                async with running(worker), heartbeat(settings.agent.health_file):
                    if ready is not None:
                        ready.set()
                    logger.info(
                        "cloud worker on %s (model: %s, agents: %s, tracing: %s)",
                        settings.agent.task_queue,
                        provider.name,
                        ", ".join(["default", *(a.name for a in served)]),
                        settings.telemetry.otlp_endpoint or "off",
                    )
                    await (stop.wait() if stop else _until_signalled())
            finally:
                if tracer_provider is not None:
                    tracer_provider.shutdown()  # flush what is buffered
    finally:
        await providers.aclose()
        await provider.aclose()


async def run_device_worker(
    settings: Settings,
    device_id: str,
    workspace: Path,
    *,
    mcp_servers: Sequence[McpServer] = (),
) -> None:
    """Trusted-operator mode: serve this device's tools on its own task queue, holding the
    cloud's credentials, until SIGINT/SIGTERM (run_device_via_gateway is the normal mode).

    `workspace` must be an absolute path: device tools are confined to it. The device is
    registered (tenant AGENT_TENANT_ID) before it serves and heartbeats while it runs, so
    `agentctl devices` and the device_online activity can tell whether it is there.
    `mcp_servers`: the device-local ones among them are spawned here; their tools are
    served too, and their specs registered for the cloud to offer (mcp_device.py).
    """
    validate_device_id(device_id)  # before any connection: the id names a task queue
    make_non_dumpable()
    logger.warning(
        "trusted-operator mode: this device worker holds database, S3 and Temporal "
        "credentials; a device that should hold only a device key sets AGENT_GATEWAY_URL"
    )
    agents = agents_from(settings.agent.definitions)
    servers = servers_of(agents, mcp_servers)
    tenant = settings.agent.tenant_id
    async with (
        McpToolsets(servers, device=True, tool_user=settings.agent.tool_user) as toolsets,
        open_resources(settings.database, settings.s3) as res,
    ):
        registry, registries, served, specs = _device_tools(agents, mcp_servers, toolsets)
        client = await connect_client(data_converter=data_converter_with_offload(res.store))
        # Not best-effort: a device that cannot reach AgentState cannot run a tool either.
        async with agent_state(res.sessions, tenant, write=True) as st:
            await st.devices.register(device_id, served, specs)
        tools = ToolActivities(
            res.sessions,
            res.store,
            registry,
            workspace=workspace,
            max_tool_argument_bytes=settings.agent.max_tool_argument_bytes,
            fetch=settings.agent.fetch_policy(),
            agents=registries,
        )
        beat = _heartbeat(res.sessions, tenant, device_id, served, specs)
        presence = asyncio.create_task(beat)
        try:
            async with running(build_device_worker(client, tenant, device_id, tools)):
                logger.info("device worker for %s serving %s", device_id, workspace)
                await _until_signalled()
        finally:
            presence.cancel()
            await asyncio.gather(presence, return_exceptions=True)


def _device_tools(
    agents: Sequence[Agent], mcp_servers: Sequence[McpServer], toolsets: McpToolsets
) -> tuple[ToolRegistry, dict[str, ToolRegistry], list[str], list[dict[str, Any]] | None]:
    """The default registry, one per agent, the names served and the MCP tool specs."""
    by_server = toolsets.by_server()
    registry = with_mcp(default_registry(), _tools_of(mcp_servers, by_server))
    # The agents' own tools too: a task of agent X routes X's device tools here.
    registries = {DEFAULT_AGENT: registry}
    for agent in agents:
        own = [*agent.tools, *_tools_of(agent.toolsets, by_server)]
        registries[agent.name] = ToolRegistry.of(own)
    names = {name for r in registries.values() for name in r.tools}
    served = sorted(names - WORKFLOW_TOOLS)
    specs = [info.record() for info in toolsets.infos()] or None
    return registry, registries, served, specs


async def run_device_via_gateway(
    settings: Settings,
    link: DeviceLinkSettings,
    workspace: Path,
    *,
    mcp_servers: Sequence[McpServer] = (),
    stop: asyncio.Event | None = None,
) -> None:
    """Serve this device's tools through the gateway with a device key only, until
    SIGINT/SIGTERM (or `stop`). Reads no database, S3 or Temporal setting."""
    make_non_dumpable()  # the device key
    agents = agents_from(settings.agent.definitions)
    servers = servers_of(agents, mcp_servers)
    async with McpToolsets(servers, device=True, tool_user=settings.agent.tool_user) as toolsets:
        _, registries, served, specs = _device_tools(agents, mcp_servers, toolsets)
        tools = LocalTools(
            registries,
            workspace,
            settings.agent.fetch_policy(),
            settings.agent.max_tool_argument_bytes,
        )
        if stop is None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
        await run_device_link(link, tools, served, specs, stop)


async def _heartbeat(
    sessions: async_sessionmaker[AsyncSession],
    tenant: str,
    device_id: str,
    tools: list[str],
    specs: list[dict[str, Any]] | None = None,
) -> None:
    """Bump last_seen_at every DEVICE_HEARTBEAT_SECONDS until cancelled.

    Best-effort: a database hiccup must not take down a worker that may be mid-tool, so a
    failed beat is logged and the next one tried. A row that vanished (deleted by an
    operator) is registered again rather than left missing.
    """
    while True:
        await asyncio.sleep(DEVICE_HEARTBEAT_SECONDS)
        try:
            async with asyncio.timeout(DEVICE_HEARTBEAT_SECONDS):
                async with agent_state(sessions, tenant, write=True) as st:
                    if not await st.devices.heartbeat(device_id):
                        await st.devices.register(device_id, tools, specs)
        except Exception:  # any failure of one beat is survivable; the next may succeed
            logger.warning("device %s heartbeat failed; retrying", device_id, exc_info=True)
