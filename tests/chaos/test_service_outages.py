"""Stop S3, PostgreSQL or Temporal under running loops, then bring it back on the same
ports and data: the runs stall, then complete, with nothing lost or duplicated, and the
real `agentctl worker` process rides the outage out without being restarted."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus

from storage.models import ItemRow
from tests.support.chaos import audit_runs, results_of, summarise
from tests.support.helpers import items_of, start, tenant_root
from tests.support.processes import WorkerProcess
from workers.resources import Resources
from workers.stack import DevStack

RUNS = 5
FILES = ["a.txt", "b.txt", "c.txt"]
SCRIPT: list[dict[str, Any]] = [
    *({"tool_calls": [{"name": "read_file", "arguments": {"path": f}}]} for f in FILES),
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "out/r.md", "content": "ok\n"}}]},
]


async def _each_run_has_a_result(res: Resources, tenant: str, session_ids: list[str]) -> None:
    async with asyncio.timeout(30):
        waiting = list(session_ids)
        while waiting:
            items = [await items_of(res, tenant, s) for s in waiting]
            waiting = [s for s, i in zip(waiting, items, strict=True) if not _has_result(i)]
            await asyncio.sleep(0.1)


def _has_result(items: list[ItemRow]) -> bool:
    return any(i.kind == "tool_result" for i in items)


async def _finished(handles: list[Any]) -> int:
    descs = [await h.describe() for h in handles]
    return sum(d.status != WorkflowExecutionStatus.RUNNING for d in descs)


async def _runs_survive(
    scenario: str,
    outage: Callable[[], Awaitable[None]],
    *,
    client: Client,
    res: Resources,
    devstack: DevStack,
    tmp_path: Path,
    tenant: str,
) -> None:
    # Tenant scope: every run of the scenario reads the same files.
    base = tmp_path / "workspace"
    workspace = tenant_root(base, tenant)
    for name in FILES:
        (workspace / name).write_text(f"{scenario} {name}\n" * 2000)
    worker = WorkerProcess(
        devstack.endpoints,
        queue=f"outage-{uuid.uuid4().hex[:8]}",
        workspace=base,
        script=SCRIPT,
        log=tmp_path / "worker.log",
        workspace_scope="tenant",
    )
    began = time.monotonic()
    worker.start()
    try:
        await asyncio.to_thread(worker.wait_started, 90)
        assert worker.proc is not None
        pid = worker.proc.pid
        started = [
            await start(
                client,
                res,
                worker.env["AGENT_TASK_QUEUE"],
                f"{scenario} run {run}",
                tenant=tenant,
                tool_timeout_seconds=5,
                approval_overrides={"write_file": False},
            )
            for run in range(RUNS)
        ]
        session_ids = [s for s, _ in started]
        handles = [h for _, h in started]
        await _each_run_has_a_result(res, tenant, session_ids)

        outage_began = time.monotonic()
        await outage()
        unavailable = time.monotonic() - outage_began
        still_running = RUNS - await _finished(handles)
        statuses = await results_of(handles, within_seconds=150)
        # The same process, never restarted, reconnected and finished the work.
        assert worker.proc is not None and worker.proc.pid == pid
        assert worker.proc.poll() is None, worker.log.read_text()[-3000:]
    finally:
        worker.stop()
    elapsed = time.monotonic() - began

    audit = await audit_runs(res, tenant, session_ids, statuses)
    summarise(
        scenario,
        audit,
        elapsed,
        unavailable=f"{unavailable:.1f}s",
        running_after_outage=still_running,
    )
    assert statuses == ["completed"] * RUNS
    assert still_running > 0, "the outage should have held some runs back"
    assert audit.duplicates == [] and audit.unanswered == [] and audit.dangling == []
    assert audit.error_results == [], "every tool call succeeded once the service was back"
    for items in audit.items.values():
        assert [i.tool_name for i in items if i.kind == "tool_result"] == [
            "read_file",
            "read_file",
            "read_file",
            "write_file",
        ]
    assert (workspace / "out/r.md").read_text() == "ok\n"


async def test_runs_stall_while_s3_is_down_and_complete_after_it_returns(
    chaos_client: Client,
    chaos_resources: Resources,
    chaos_devstack: DevStack,
    tmp_path: Path,
    tenant: str,
) -> None:
    async def outage() -> None:
        await asyncio.to_thread(chaos_devstack.seaweed.stop)
        try:
            await asyncio.sleep(15)
        finally:
            await asyncio.to_thread(chaos_devstack.seaweed.start)

    await _runs_survive(
        "s3_down_15s",
        outage,
        client=chaos_client,
        res=chaos_resources,
        devstack=chaos_devstack,
        tmp_path=tmp_path,
        tenant=tenant,
    )


async def test_postgres_restart_mid_run_is_retried_and_runs_complete(
    chaos_client: Client,
    chaos_resources: Resources,
    chaos_devstack: DevStack,
    tmp_path: Path,
    tenant: str,
) -> None:
    async def outage() -> None:
        await asyncio.to_thread(chaos_devstack.postgres.stop)
        try:
            await asyncio.sleep(3)
        finally:
            await asyncio.to_thread(chaos_devstack.postgres.start)
        await chaos_resources.engine.dispose()  # the test's own pooled connections died too

    await _runs_survive(
        "postgres_restart",
        outage,
        client=chaos_client,
        res=chaos_resources,
        devstack=chaos_devstack,
        tmp_path=tmp_path,
        tenant=tenant,
    )


async def test_temporal_restart_mid_run_worker_reconnects_and_runs_continue(
    chaos_client: Client,
    chaos_resources: Resources,
    chaos_devstack: DevStack,
    tmp_path: Path,
    tenant: str,
) -> None:
    async def outage() -> None:
        await asyncio.to_thread(chaos_devstack.temporal.stop)
        try:
            await asyncio.sleep(3)
        finally:
            await asyncio.to_thread(chaos_devstack.temporal.start)

    await _runs_survive(
        "temporal_restart",
        outage,
        client=chaos_client,
        res=chaos_resources,
        devstack=chaos_devstack,
        tmp_path=tmp_path,
        tenant=tenant,
    )
