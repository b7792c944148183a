"""The cloud worker's health file (AGENT_HEALTH_FILE, workers/process/health_file.py): touched while
the real worker polls the dev server, gone once it stops. tests/test_k8s_manifests.py runs
the probe command against it."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from durable_agents.workers.process.run import run_cloud_worker
from durable_agents.workers.stack import StackEndpoints


async def test_the_cloud_worker_keeps_its_health_file_fresh_while_it_polls(
    migrated: StackEndpoints, cli_env: None, tmp_path: Path
) -> None:
    health = tmp_path / "run" / "alive"
    queue = f"health-{uuid.uuid4().hex[:10]}"
    settings = migrated.settings(workspace=tmp_path, task_queue=queue, provider="offline")
    settings.agent = settings.agent.model_copy(update={"health_file": health})
    stop, ready = asyncio.Event(), asyncio.Event()
    worker = asyncio.create_task(run_cloud_worker(settings, stop, ready=ready))
    try:
        await asyncio.wait_for(ready.wait(), 60)
        async with asyncio.timeout(5):
            while not health.exists():  # noqa: ASYNC110 (a file another task writes)
                await asyncio.sleep(0.05)
        first = health.stat().st_mtime_ns
        assert first > 0
    finally:
        stop.set()
        await asyncio.wait_for(worker, 60)
    assert not health.exists()  # a stopped worker is not reported alive
