"""The bare side of bench/parked_approvals.py --bare: Temporal's own floor for the same
commands (bench/bare_worker.py), run on the same stack after our sessions, and the ratio of
CPU per approval, ours / bare, process by process."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bare_worker import CALL_ID, BareApproval, BareSession
from bounded_calls import bounded
from parked_report import Report, note_errors, secs
from parked_worker import WorkerGroup, WorkerProcess, marker_content, marker_path
from proc_stats import CpuSnapshot, cpu_between, cpu_used, per_session_ms
from temporalio.client import Client, WorkflowHandle
from worker_metrics import cache_between

from durable_agents.workers.settings import Settings
from durable_agents.workers.stack import StackEndpoints


class BareWorkerProcess(WorkerProcess):
    """bench/bare_worker.py in place of bench/parked_worker.py, with the same cache and forks."""

    def __init__(self, ep: StackEndpoints, *, max_cached: int, **kwargs: Any) -> None:
        super().__init__(ep, max_cached=max_cached, **kwargs)
        script = Path(__file__).with_name("bare_worker.py")
        self.argv = [sys.executable, str(script), "--max-cached", str(max_cached)]
        self.argv += ["--processes", str(self.processes)]


async def measure_bare(
    report: Report,
    client: Client,
    worker: WorkerGroup,
    state: Path,
    workspace: Path,
    queue: str,
    n: int,
    conc: int,
    limit_s: float,
) -> dict[str, float]:
    """Start n bare runs, wait until each is parked, approve them all and wait until every
    one completed; check their files. Returns the CPU seconds per process group from the
    first approval to the last completion."""
    run = uuid.uuid4().hex[:8]

    async def start_one(i: int) -> WorkflowHandle[Any, Any]:
        return await client.start_workflow(
            BareApproval.run, BareSession(i), id=f"bare-{run}-{i:05d}", task_queue=queue
        )

    print("phase: bare start", flush=True)
    t0 = time.perf_counter()
    cpu0 = CpuSnapshot.take(worker.pids, state)
    started, errors = await bounded(conc, range(n), start_one)
    note_errors(report, "bare start", errors)
    handles: list[WorkflowHandle[Any, Any]] = [h for h in started if h is not None]
    waiting = list(handles)
    deadline = time.monotonic() + limit_s
    while waiting and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        statuses, _ = await bounded(conc, waiting, lambda h: h.query(BareApproval.status))
        waiting = [h for h, s in zip(waiting, statuses, strict=True) if s != "waiting_approval"]
    t_parked = time.perf_counter() - t0
    cpu_parked = CpuSnapshot.take(worker.pids, state)
    report.add(
        "bare: all parked since first start",
        secs(t_parked, len(handles)) if not waiting else f"{len(waiting)} NOT parked",
    )
    report.add(
        "bare: CPU, first start to all parked (with the status queries)",
        cpu_between(cpu0, cpu_parked),
    )

    print("phase: bare approve", flush=True)
    ta = time.perf_counter()
    cpu_approve = CpuSnapshot.take(worker.pids, state)
    cache_approve = worker.cache_counters()
    decisions, errors = await bounded(
        conc, handles, lambda h: h.execute_update(BareApproval.approve, CALL_ID)
    )
    note_errors(report, "bare approve", errors)
    approved = sum(1 for d in decisions if d)
    report.add(
        f"bare: approve {approved}/{len(handles)} (updates returned)",
        secs(time.perf_counter() - ta, approved),
    )
    running = await _running(client, queue, limit_s)
    t_complete = time.perf_counter() - ta
    cpu_done = CpuSnapshot.take(worker.pids, state)
    report.add(
        "bare: all completed since first approval",
        secs(t_complete, approved) if running == 0 else f"{running} still running",
    )
    report.add("bare: CPU, first approval to all completed", cpu_between(cpu_approve, cpu_done))
    report.add(
        "bare: worker cache, first approval to all completed",
        cache_between(cache_approve, worker.cache_counters(), n),
    )
    results, errors = await bounded(conc, handles, lambda h: h.result())
    note_errors(report, "bare result", errors)
    done = sum(1 for r in results if r == "completed")
    report.check("bare workflows completed", done == n, f"{done}/{n}")
    right = sum(
        1
        for i in range(n)
        if (workspace / marker_path(i)).is_file()
        and (workspace / marker_path(i)).read_text() == marker_content(i)
    )
    report.check("bare files written with their content", right == n, f"{right}/{n}")
    return cpu_used(cpu_approve, cpu_done)


async def _running(client: Client, queue: str, limit_s: float) -> int:
    """Wait until no run on `queue` is running (visibility, polled); how many still are."""
    deadline = time.monotonic() + limit_s
    query = f"TaskQueue = '{queue}' AND ExecutionStatus = 'Running'"
    running = -1
    while time.monotonic() < deadline:
        running = (await client.count_workflows(query)).count
        if running == 0:
            return 0
        await asyncio.sleep(0.5)
    return running


def report_ratio(report: Report, ours: dict[str, float], bare: dict[str, float], n: int) -> None:
    """CPU per approval through completion, ours and bare, and ours / bare: in all and for
    each process group both runs have."""
    report.add("CPU per approval, ours", per_session_ms(ours, n))
    report.add("CPU per approval, bare", per_session_ms(bare, n))
    total_ours = sum(v for k, v in ours.items() if k != "other")
    total_bare = sum(v for k, v in bare.items() if k != "other")
    parts = [f"all {total_ours / total_bare:.2f}x"]
    for group in ("worker", "temporal", "client"):
        if bare.get(group, 0.0) > 0:
            parts.append(f"{group} {ours.get(group, 0.0) / bare[group]:.2f}x")
    report.add("CPU per approval, ours / bare", ", ".join(parts))


async def run_bare(
    args: argparse.Namespace,
    report: Report,
    ep: StackEndpoints,
    state: Path,
    ours: dict[str, float],
) -> None:
    """The same sessions as bare runs, on a worker group of the same shape; the ratio. The
    client is plain too: no payload codec."""
    client = await Client.connect(ep.temporal_address)
    workspace, queue = state / "bare-workspace", f"bare-{uuid.uuid4().hex[:8]}"
    workspace.mkdir()
    max_cached = (
        Settings().agent.max_cached_workflows if args.max_cached is None else args.max_cached
    )
    group = WorkerGroup(
        [
            BareWorkerProcess(
                ep,
                queue=queue,
                workspace=workspace,
                sessions=args.sessions,
                max_cached=max_cached,
                log=state / f"bare-worker-{i}.log",
                processes=args.forked,
            )
            for i in range(args.workers)
        ]
    )
    group.start()
    try:
        await group.wait_ready()
        await asyncio.sleep(1.0)
        floor = await measure_bare(
            report,
            client,
            group,
            state,
            workspace,
            queue,
            args.sessions,
            args.concurrency,
            args.timeout,
        )
        report_ratio(report, ours, floor, args.sessions)
    finally:
        group.stop()
