"""A cloud worker process serving the built-in tools plus two user-defined effectful tools
that count their executions outside the system (tests/support/effect_tools.py), so a
chaos test can SIGKILL it between a tool's effect and its commit.

Run as `python -m tests.support.effect_worker` with the stack's environment (as
`agentctl worker` is) and EFFECT_COUNT_FILE naming the count file.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.base import ToolRegistry
from durable_agents.activities.tools.builtin import builtin_tools
from durable_agents.workers.process.cloud import build_cloud_worker, cloud_activities, running
from durable_agents.workers.resources import open_resources
from durable_agents.workers.settings import get_settings
from durable_agents.workers.temporal_client import connect_client
from tests.support.effect_tools import bump_tool

logger = logging.getLogger("tests.support.effect_worker")

COUNT_FILE_ENV = "EFFECT_COUNT_FILE"
# A task whose text starts with this runs the tool that has a reconcile.
RECONCILED_TASK = "reconciled:"


def _provider() -> ScriptedProvider:
    def calling(name: str) -> list[dict[str, object]]:
        return [{"tool_calls": [{"name": name, "arguments": {"label": "once"}}]}]

    return ScriptedProvider.from_data(
        calling("bump"), by_task={RECONCILED_TASK: calling("bump_checked")}
    )


async def serve() -> None:
    settings = get_settings()
    count_file = Path(os.environ[COUNT_FILE_ENV])
    registry = ToolRegistry.of(
        [
            *builtin_tools(),
            bump_tool(count_file, name="bump", hang_first=True),
            bump_tool(count_file, name="bump_checked", hang_first=True, reconciles=True),
        ]
    )
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    async with open_resources(settings.database, settings.s3) as res:
        client = await connect_client()
        acts = cloud_activities(settings, res, _provider(), registry)
        worker = build_cloud_worker(client, acts, task_queue=settings.agent.task_queue)
        async with running(worker):
            logger.info("cloud worker on %s (effect counting)", settings.agent.task_queue)
            await stop.wait()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    asyncio.run(serve())
