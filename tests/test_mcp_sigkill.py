"""SIGKILL a worker process while an MCP tool call is in flight: a new worker finishes the
task, the result commits once, and the server saw the same idempotency key both times."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client

from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.chaos import fail_attempts_of_dead_worker
from tests.support.helpers import items_of, s3_sha256, start, stored_key
from tests.support.mcp import REPO, recorded, toolbox_http
from tests.support.processes import WorkerProcess

START_TIMEOUT = 90


class McpWorkerProcess(WorkerProcess):
    """The cloud worker of tests/support/mcp_worker.py: agentctl's, plus MCP servers."""

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.support.mcp_worker"],
                env={**self.env, "PYTHONPATH": str(REPO)},
                stdout=out,
                stderr=subprocess.STDOUT,
            )


async def _calls_received(record: Path, count: int, within: float = 60) -> None:
    async with asyncio.timeout(within):
        while True:
            if len(recorded(record, "block")) >= count:
                return
            await asyncio.sleep(0.1)


async def test_worker_sigkilled_during_an_mcp_call_the_next_finishes_with_the_same_key(
    client: Client,
    resources: Resources,
    migrated: StackEndpoints,
    tmp_path: Path,
    tenant: str,
) -> None:
    record = tmp_path / "record.jsonl"
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "web__block", "arguments": {"token": "t1"}}]},
        {"text": "done"},
    ]
    with toolbox_http("web", record, tmp_path / "http.log") as web:
        worker = McpWorkerProcess(
            migrated,
            queue=f"mcp-kill-{uuid.uuid4().hex[:8]}",
            workspace=tmp_path / "ws",
            script=script,
            log=tmp_path / "worker.log",
        )
        worker.env["MCP_HTTP_SERVERS"] = json.dumps({"web": web.url})
        worker.start()
        try:
            await asyncio.to_thread(worker.wait_started, START_TIMEOUT)
            session_id, handle = await start(
                client, resources, worker.env["AGENT_TASK_QUEUE"], tenant=tenant
            )
            # The server holds the call open: the worker dies with it in flight.
            await _calls_received(record, 1)
            assert worker.proc is not None
            pid = worker.proc.pid
            worker.kill()
            await fail_attempts_of_dead_worker(client, [handle], pid)
            worker.start()
            await asyncio.to_thread(worker.wait_started, START_TIMEOUT)
            await asyncio.wait_for(handle.result(), 120)
        finally:
            worker.stop()

    results = [i for i in await items_of(resources, tenant, session_id) if i.kind == "tool_result"]
    assert len(results) == 1  # committed once
    row = results[0]
    body = b"unblocked t1"  # a string result is stored as its text
    assert row.data["artifact"]["sha256"] == hashlib.sha256(body).hexdigest()
    assert (
        await s3_sha256(resources, stored_key(resources, row)) == hashlib.sha256(body).hexdigest()
    )
    # Both attempts reached the server, under the one key the result committed with.
    assert [c["key"] for c in recorded(record, "block")] == [row.idempotency_key] * 2
