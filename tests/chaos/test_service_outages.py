"""Stop S3, PostgreSQL or Temporal under running loops, then bring it back on the same
ports and data: the runs stall, then complete, with nothing lost or duplicated, and the
real `agentctl worker` process rides the outage out without being restarted."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

import pytest
from temporalio.client import Client

from durable_agents.storage.models import ItemRow
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import DevStack
from tests.support.chaos import audit_runs, results_of, summarise
from tests.support.helpers import items_of, start, tenant_root
from tests.support.processes import WorkerProcess

RUNS = 5
FILES = ["a.txt", "b.txt", "c.txt"]
OUT = "out/r.md"
GATE_BODY = b"through the gate\n"


def _call(name: str, **arguments: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _script(gate_url: str) -> list[dict[str, Any]]:
    """A read, the gate, two more reads and a write: no run can finish before the outage."""
    return [
        _call("read_file", path=FILES[0]),
        _call("fetch_url", url=gate_url),
        *(_call("read_file", path=f) for f in FILES[1:]),
        _call("write_file", path=OUT, content="ok\n"),
    ]


class Service(Protocol):
    """A service of the chaos stack, stopped and started again on its ports and data."""

    def stop(self) -> None: ...
    def start(self) -> None: ...


class _Gate(BaseHTTPRequestHandler):
    """A remote page (outside the system) that answers only once the test opens it."""

    opened: threading.Event  # one per server: see the `gate` fixture

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.opened.wait(120)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(GATE_BODY)))
        self.end_headers()
        self.wfile.write(GATE_BODY)


@pytest.fixture
def gate() -> Iterator[tuple[str, threading.Event]]:
    """The page's URL and the event that opens it; closed until the test sets it."""
    handler = type("Gate", (_Gate,), {"opened": threading.Event()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/gate", handler.opened
    finally:
        handler.opened.set()
        server.shutdown()
        server.server_close()


async def _each_run_has_a_result(res: Resources, tenant: str, session_ids: list[str]) -> None:
    async with asyncio.timeout(30):
        waiting = list(session_ids)
        while waiting:
            items = [await items_of(res, tenant, s) for s in waiting]
            waiting = [s for s, i in zip(waiting, items, strict=True) if not _has_result(i)]
            await asyncio.sleep(0.1)


def _has_result(items: list[ItemRow]) -> bool:
    return any(i.kind == "tool_result" for i in items)


def _held_back(items: dict[str, list[ItemRow]], back: datetime) -> int:
    """Runs that committed work after the service's restart began, read from the rows' own
    commit times: the outage held those runs up."""
    return sum(any(i.created_at > back for i in rows) for rows in items.values())


async def _runs_survive(
    scenario: str,
    service: Service,
    down_for: float,
    *,
    gate: tuple[str, threading.Event],
    client: Client,
    res: Resources,
    devstack: DevStack,
    tmp_path: Path,
    tenant: str,
) -> None:
    gate_url, opened = gate
    # Tenant scope: every run of the scenario reads the same files.
    base = tmp_path / "workspace"
    workspace = tenant_root(base, tenant)
    for name in FILES:
        (workspace / name).write_text(f"{scenario} {name}\n" * 2000)
    worker = WorkerProcess(
        devstack.endpoints,
        queue=f"outage-{uuid.uuid4().hex[:8]}",
        workspace=base,
        script=_script(gate_url),
        log=tmp_path / "worker.log",
        workspace_scope="tenant",
        # The gate is served on loopback, which only an operator's allowlist opens.
        env={"AGENT_FETCH_ALLOW": "127.0.0.1"},
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
                loosened_approvals={"write_file": "never"},
                loosened_by="test",
            )
            for run in range(RUNS)
        ]
        session_ids = [s for s, _ in started]
        handles = [h for _, h in started]
        await _each_run_has_a_result(res, tenant, session_ids)

        # Every run is at the gate or before it, however fast the machine. The gate opens
        # once the service is down, so the fetches finish into the outage.
        outage_began = time.monotonic()
        await asyncio.to_thread(service.stop)
        opened.set()
        try:
            await asyncio.sleep(down_for)
        finally:
            # Taken before the restart: the service serves the worker before its own start
            # returns (that start also waits for readiness), so a later instant could
            # postdate the work the outage held up.
            back = datetime.now(UTC)
            await asyncio.to_thread(service.start)
        unavailable = time.monotonic() - outage_began
        await res.engine.dispose()  # the test's own pooled connections may have died too
        statuses = await results_of(handles, within_seconds=150)
        # The same process, never restarted, reconnected and finished the work.
        assert worker.proc is not None and worker.proc.pid == pid
        assert worker.proc.poll() is None, worker.log.read_text()[-3000:]
    finally:
        worker.stop()
    elapsed = time.monotonic() - began

    audit = await audit_runs(res, tenant, session_ids, statuses)
    held_back = _held_back(audit.items, back)
    summarise(scenario, audit, elapsed, unavailable=f"{unavailable:.1f}s", held_back=held_back)
    assert statuses == ["completed"] * RUNS
    assert held_back == RUNS, "every run still had work to do when the service came back"
    assert audit.duplicates == [] and audit.unanswered == [] and audit.dangling == []
    assert audit.error_results == [], "every tool call succeeded once the service was back"
    for items in audit.items.values():
        results = [i.tool_name for i in items if i.kind == "tool_result"]
        assert results == ["read_file", "fetch_url", "read_file", "read_file", "write_file"]
    assert (workspace / OUT).read_text() == "ok\n"


async def test_runs_stall_while_s3_is_down_and_complete_after_it_returns(
    chaos_client: Client,
    chaos_resources: Resources,
    chaos_devstack: DevStack,
    gate: tuple[str, threading.Event],
    tmp_path: Path,
    tenant: str,
) -> None:
    await _runs_survive(
        "s3_down_15s",
        chaos_devstack.seaweed,
        15,
        gate=gate,
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
    gate: tuple[str, threading.Event],
    tmp_path: Path,
    tenant: str,
) -> None:
    await _runs_survive(
        "postgres_restart",
        chaos_devstack.postgres,
        3,
        gate=gate,
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
    gate: tuple[str, threading.Event],
    tmp_path: Path,
    tenant: str,
) -> None:
    await _runs_survive(
        "temporal_restart",
        chaos_devstack.temporal,
        3,
        gate=gate,
        client=chaos_client,
        res=chaos_resources,
        devstack=chaos_devstack,
        tmp_path=tmp_path,
        tenant=tenant,
    )
