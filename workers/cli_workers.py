"""`agentctl worker` and `agentctl device`: the long-running worker processes."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from storage.devices import validate_device_id
from workers.cli_common import run_async
from workers.settings import get_settings


def worker(
    agents: Annotated[
        str | None,
        typer.Option(
            help="Agents to serve besides the default, as module:ATTR (AGENT_DEFINITIONS)."
        ),
    ] = None,
) -> None:
    """Run the cloud worker against the configured Temporal, PostgreSQL and S3."""
    from workers.processes import run_cloud_worker

    settings = get_settings()
    if agents is not None:
        settings = settings.model_copy(
            update={"agent": settings.agent.model_copy(update={"definitions": agents})}
        )
    logging.getLogger().setLevel(logging.INFO)
    run_async(run_cloud_worker(settings))


def device(
    device_id: Annotated[str, typer.Option(help="This device's id (task queue device-<id>).")],
    workspace: Annotated[
        Path,
        typer.Option(exists=True, file_okay=False, help="Folder the device tools may touch."),
    ] = Path("."),
    mcp_servers: Annotated[
        str | None, typer.Option(help="MODULE:ATTR of MCP servers; device-local ones run here.")
    ] = None,
) -> None:
    """Run this device's worker: device-local tools for tasks started with --device."""
    from workers.mcp_declarations import load_servers
    from workers.processes import run_device_worker

    validate_device_id(device_id)
    servers = load_servers(mcp_servers) if mcp_servers else []

    logging.getLogger().setLevel(logging.INFO)
    run_async(
        run_device_worker(get_settings(), device_id, workspace.resolve(), mcp_servers=servers)
    )
