"""Long-running worker processes: the cloud worker and a device worker."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

from activities.providers.factory import build_provider
from activities.tool_run import ToolActivities
from activities.tools.builtin import default_registry
from workers.cloud import build_cloud_worker, cloud_activities, running
from workers.device import build_device_worker
from workers.resources import open_resources
from workers.settings import Settings
from workers.temporal_client import connect_client

logger = logging.getLogger(__name__)


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def run_cloud_worker(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Serve workflows and cloud activities until SIGINT/SIGTERM (or `stop` is set)."""
    provider = build_provider(settings.model)
    client = await connect_client()
    try:
        async with open_resources(settings.database, settings.s3) as res:
            await res.store.ensure_bucket()
            acts = cloud_activities(settings, res, provider, default_registry())
            worker = build_cloud_worker(client, acts, task_queue=settings.agent.task_queue)
            async with running(worker):
                logger.info(
                    "cloud worker on %s (model: %s)", settings.agent.task_queue, provider.name
                )
                await (stop.wait() if stop else _until_signalled())
    finally:
        await provider.aclose()


async def run_device_worker(settings: Settings, device_id: str, workspace: Path) -> None:
    """Serve this device's tools on its own task queue until SIGINT/SIGTERM.

    `workspace` must be an absolute path: device tools are confined to it.
    """
    client = await connect_client()
    async with open_resources(settings.database, settings.s3) as res:
        tools = ToolActivities(
            res.sessions,
            res.store,
            default_registry(),
            workspace=workspace,
            fetch_max_bytes=settings.agent.fetch_max_bytes,
        )
        async with running(build_device_worker(client, device_id, tools)):
            logger.info("device worker for %s serving %s", device_id, workspace)
            await _until_signalled()
