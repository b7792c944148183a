"""A production cloud worker (`agentctl worker`) exports its trajectory over OTLP when
AGENT_TRACE_OTLP_ENDPOINT is set, and flushes it on shutdown."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from temporalio.client import Client

from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.helpers import session_root, start
from tests.support.processes import WorkerProcess
from tests.test_outbox import Receiver


async def test_agentctl_worker_exports_chat_and_tool_spans_to_the_collector(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    workspace: Path,
    tmp_path: Path,
    tenant: str,
) -> None:
    sid = uuid.uuid4()
    (session_root(workspace, tenant, sid) / "a.txt").write_text(
        "TRACE-CONTENT-MARK never leaves by value"
    )
    receiver = Receiver(tmp_path)
    receiver.start()
    queue = f"traced-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(
        migrated,
        queue=queue,
        workspace=workspace,
        log=tmp_path / "worker.log",
        script=[{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}],
    )
    worker.env["AGENT_TRACE_OTLP_ENDPOINT"] = f"http://127.0.0.1:{receiver.port}"
    try:
        worker.start()
        await asyncio.to_thread(worker.wait_started)
        _, handle = await start(client, resources, queue, tenant=tenant, session_id=sid)
        await asyncio.wait_for(handle.result(), 60)
        worker.stop()  # SIGTERM: the worker flushes its span batch on the way out
        for _ in range(100):
            seen = receiver.log.read_text()
            if "execute_tool read_file" in seen:
                break
            await asyncio.sleep(0.1)
    finally:
        worker.stop()
        receiver.stop()
    assert "Name           : chat " in seen and "execute_tool read_file" in seen
    assert "invoke_agent AgentWorkflow" in seen
    assert "TRACE-CONTENT-MARK" not in seen
