"""`agentctl gateway`: serve the authenticated HTTP API (uvicorn) on this machine.

The gateway holds the Temporal, database and S3 credentials; its clients hold API keys.
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from durable_agents.workers.cli.common import console, run_async, temporal_client, with_resources
from durable_agents.workers.process.payload_offload import data_converter_with_offload
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import get_settings
from durable_agents.workers.temporal_client import connect_client


def gateway(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one).")] = 8000,
) -> None:
    """Serve the gateway (web page at /, REST API under /v1, OpenAPI schema at /openapi.json) until
    interrupted."""
    import uvicorn

    from durable_agents.workers.gateway.app import create_app

    logging.getLogger().setLevel(logging.INFO)

    async def go(res: Resources) -> None:
        await temporal_client()  # a clear error if Temporal is unreachable
        # The workers' converter: payloads they offloaded to S3 read back the same way.
        client = await connect_client(data_converter=data_converter_with_offload(res.store))
        app = create_app(res, client, get_settings())
        config = uvicorn.Config(app, host=host, port=port, log_level="info", access_log=False)
        server = uvicorn.Server(config)
        console.print(f"gateway on http://{host}:{port} (web page: /, API schema: /openapi.json)")
        await server.serve()

    run_async(with_resources(go))
