"""`agentctl worker` and `agentctl device`: the long-running worker processes."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated

import typer

from durable_agents.storage.devices import validate_device_id
from durable_agents.workers.cli.common import run_async
from durable_agents.workers.settings import get_settings


def worker(
    agents: Annotated[
        str | None,
        typer.Option(
            help="Agents to serve besides the default, as module:ATTR (AGENT_DEFINITIONS)."
        ),
    ] = None,
    processes: Annotated[
        int,
        typer.Option(
            min=1,
            help="Worker processes to fork after importing once (one core each; the "
            "workflow cache, AGENT_MAX_CACHED_WORKFLOWS, is per process).",
        ),
    ] = 1,
) -> None:
    """Run the cloud worker against the configured Temporal, PostgreSQL and S3."""
    from durable_agents.workers.process.run import run_cloud_worker

    settings = get_settings()
    if agents is not None:
        settings = settings.model_copy(
            update={"agent": settings.agent.model_copy(update={"definitions": agents})}
        )
    logging.getLogger().setLevel(logging.INFO)
    if processes == 1:
        run_async(run_cloud_worker(settings))
        return
    from durable_agents.workers.process.prefork import run_forked

    # Does not return: this process supervises the workers and exits with their status.
    run_forked(
        processes,
        lambda _: run_async(run_cloud_worker(settings)),
        encoding=settings.model.encoding,
    )


def device(
    device_id: Annotated[
        str | None,
        typer.Option(
            help="Trusted-operator mode only: this device's id (task queue device:TENANT:ID). "
            "With AGENT_GATEWAY_URL set, the device key names the device instead."
        ),
    ] = None,
    workspace: Annotated[
        Path,
        typer.Option(exists=True, file_okay=False, help="Folder the device tools may touch."),
    ] = Path("."),
    mcp_servers: Annotated[
        str | None, typer.Option(help="MODULE:ATTR of MCP servers; device-local ones run here.")
    ] = None,
) -> None:
    """Serve this device's tools (device-local tools for tasks started with --device).

    Normal mode: set AGENT_GATEWAY_URL and AGENT_DEVICE_KEY (from `agentctl keys create
    --device ID`); the device reaches the cloud only through the gateway and holds no
    database, S3 or Temporal credential.

    Trusted-operator mode (no AGENT_GATEWAY_URL, --device-id given): the old direct device
    worker, which holds DATABASE_URL, the S3 identity and Temporal access itself. Use it
    only on a machine you would trust with every tenant's data.
    """
    from durable_agents.workers.process.mcp_declarations import load_servers

    servers = load_servers(mcp_servers) if mcp_servers else []
    logging.getLogger().setLevel(logging.INFO)
    if os.environ.get("AGENT_GATEWAY_URL"):
        from durable_agents.workers.device.link import DeviceLinkSettings
        from durable_agents.workers.process.run import run_device_via_gateway

        if not os.environ.get("AGENT_DEVICE_KEY"):
            raise ValueError("AGENT_GATEWAY_URL is set but AGENT_DEVICE_KEY is not")
        link = DeviceLinkSettings()  # both from the environment
        run_async(
            run_device_via_gateway(get_settings(), link, workspace.resolve(), mcp_servers=servers)
        )
        return
    from durable_agents.workers.process.run import run_device_worker

    if device_id is None:
        raise ValueError(
            "set AGENT_GATEWAY_URL and AGENT_DEVICE_KEY (normal mode), or give --device-id "
            "for the trusted-operator mode"
        )
    validate_device_id(device_id)
    run_async(
        run_device_worker(get_settings(), device_id, workspace.resolve(), mcp_servers=servers)
    )
