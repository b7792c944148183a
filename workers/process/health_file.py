"""A liveness file for the cloud worker (AGENT_HEALTH_FILE): touched every few seconds by
the worker's own event loop while it polls, removed when it stops.

The worker serves no HTTP, and an exec probe that starts agentctl would import ~115 MiB and
spend seconds of CPU each period. An orchestrator's probe reads the file's age instead
(workers/deploy/k8s/worker.yaml: `find FILE -mmin -1`): fresh means the process polls and
its loop is not blocked; stale or missing means restart it. Under `--processes N` every
process touches the same file, so it goes stale only once none of them beats; a process
that dies takes the group down (workers/process/prefork.py), which the restart covers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

logger = logging.getLogger(__name__)

# Well inside the probe's one minute, so a few slow beats do not restart a busy worker.
BEAT_SECONDS = 10.0


async def _beat(path: Path, every: float) -> None:
    while True:
        try:
            await asyncio.to_thread(path.touch)
        except OSError as err:  # a full or read-only volume: the probe will say so
            logger.warning("health file %s not touched: %s", path, err.strerror)
        await asyncio.sleep(every)


@asynccontextmanager
async def heartbeat(path: Path | None, every: float = BEAT_SECONDS) -> AsyncIterator[None]:
    """Keep `path` fresh for the length of the block (nothing when `path` is None)."""
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    task = asyncio.create_task(_beat(path, every))
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.to_thread(path.unlink, missing_ok=True)
