"""The waiting and starting phases of bench/parked_approvals.py: start N sessions, and poll
AgentState until enough of a tenant's sessions have a status."""

from __future__ import annotations

import asyncio
import time

from bounded_calls import bounded  # bench/ is on sys.path as a script
from parked_report import Report, note_errors, secs
from parked_worker import WorkerGroup, task_text
from sqlalchemy import text
from temporalio.client import Client

from durable_agents.workers.client.tasks import TaskOptions, start_task
from durable_agents.workers.resources import Resources


async def status_counts(res: Resources, tenant: str) -> dict[str, int]:
    async with res.sessions() as db:
        rows = await db.execute(
            text("SELECT status, count(*) FROM sessions WHERE tenant_id = :t GROUP BY status"),
            {"t": tenant},
        )
        return {str(status): int(n) for status, n in rows.all()}


async def wait_for_status(
    res: Resources,
    tenant: str,
    statuses: tuple[str, ...],
    want: int,
    limit_s: float,
    worker: WorkerGroup,
    poll: float,
    settle: float | None = None,
) -> tuple[bool, dict[str, int]]:
    """Poll AgentState until `want` sessions of the tenant have one of `statuses`; with
    `settle`, give up early (False) once the counts have not changed for that long."""
    deadline = time.monotonic() + limit_s
    last_print = last_change = time.monotonic()
    counts: dict[str, int] = {}
    while time.monotonic() < deadline:
        before, counts = counts, await status_counts(res, tenant)
        if sum(counts.get(status, 0) for status in statuses) >= want:
            return True, counts
        if counts != before:
            last_change = time.monotonic()
        elif settle is not None and time.monotonic() - last_change > settle:
            return False, counts
        if not worker.alive():
            raise RuntimeError(f"worker died:\n{worker.tail()}")
        if time.monotonic() - last_print > 5:
            rss, _ = worker.mem_kib()
            pss = worker.pss_kib()
            print(
                f"    ... {counts} (worker RSS {rss / 1024:.0f} MiB, PSS {pss / 1024:.0f} MiB)",
                flush=True,
            )
            last_print = time.monotonic()
        await asyncio.sleep(poll)
    return False, counts


async def start_all(
    report: Report, res: Resources, client: Client, options: TaskOptions, n: int, conc: int
) -> list[str]:
    """Start sessions 0..n-1, `conc` at a time; the ids of those started."""
    t0 = time.perf_counter()

    async def start_one(i: int) -> str:
        handle = await start_task(client, res.sessions, task_text(i), options)
        return handle.id.removeprefix("agent-")

    started, errors = await bounded(conc, range(n), start_one)
    note_errors(report, "start", errors)
    ids = [sid for sid in started if sid is not None]
    report.add(
        f"start {len(ids)}/{n} tasks (concurrency {conc})",
        secs(time.perf_counter() - t0, len(ids)),
    )
    return ids
