"""One tenant's flood against another tenant's steps, on one task queue and one worker group:
tenant B's step p95 while tenant A's tasks flood the queue, against B's quiet p95 in the same
run.

Tenant B runs its tasks (QUIET steps of one `list_dir` call each, a few at a time) alone
first: its quiet steps. Then tenant A starts FLOOD tasks (50 starts in flight) whose every
reply asks for FANOUT calls at once, and B runs the same tasks again while A's flood is
under way: its steps in the flood. A step is one model activity's schedule to the next, read
from the run's Temporal history (bench/step_tail.py). Every task of both tenants must end
`completed`.

    .venv/bin/python bench/noisy_neighbour.py                      # fairness on (the default)
    .venv/bin/python bench/noisy_neighbour.py --fairness off       # the server's FIFO, to compare

Both tenants' tasks carry their tenant as Temporal's fairness key (workers/client/fairness.py);
`--fairness off` starts the Temporal server without fairness, so the same keys are ignored.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from bounded_calls import bounded
from cold_tier import pct
from noisy_worker import (
    FLOOD,
    QUIET,
    NoisyWorkerProcess,
    dirs_needed,
    task_text,
)  # bench/ is on sys.path
from parked_worker import WorkerGroup
from proc_stats import CpuSnapshot, cpu_between, machine_facts
from step_tail import step_components
from temporalio.client import Client
from throwaway_stack import bench_stack

from durable_agents.storage.workspaces import TENANT_DIR
from durable_agents.workers.client.tasks import TaskOptions, start_task, task_handle
from durable_agents.workers.process.payload_offload import data_converter_with_offload
from durable_agents.workers.resources import Resources
from durable_agents.workers.temporal_client import connect_client

MODEL_ACTIVITIES = {"call_model"}


async def all_of(
    limit: int, items: Sequence[Any], fn: Callable[[Any], Awaitable[Any]]
) -> list[Any]:
    """bounded() over items, raising the first error: every task of the bench must work."""
    results, errors = await bounded(limit, items, fn)
    if errors:
        raise errors[0]
    return list(results)


def summary(steps: Sequence[float]) -> str:
    if not steps:
        return "no steps"
    return (
        f"{len(steps)} steps: p50 {statistics.median(steps):.0f} ms, "
        f"p95 {pct(list(steps), 0.95):.0f} ms, max {max(steps):.0f} ms"
    )


async def run_tenant(
    client: Client,
    res: Resources,
    options: TaskOptions,
    kind: str,
    count: int,
    concurrency: int,
    first: int = 0,
) -> list[str]:
    """Start `count` tasks of `kind`, `concurrency` at a time, each awaited to its end;
    their session ids."""

    async def one(i: int) -> str:
        handle = await start_task(client, res.sessions, task_text(kind, i), options)
        result = await handle.result()
        if result.status != "completed":
            raise RuntimeError(f"{kind} task {i} ended {result.status}: {result.last_error}")
        return handle.id.removeprefix("agent-")

    return await all_of(concurrency, range(first, first + count), one)


async def start_flood(
    client: Client, res: Resources, options: TaskOptions, count: int
) -> list[str]:
    async def one(i: int) -> str:
        handle = await start_task(client, res.sessions, task_text(FLOOD, i), options)
        return handle.id.removeprefix("agent-")

    return await all_of(50, range(count), one)


async def steps_of(client: Client, session_ids: Sequence[str]) -> list[dict[str, float]]:
    """Every step of the sessions, its parts in ms (bench/step_tail.py)."""
    steps: list[dict[str, float]] = []
    for sid in session_ids:
        history = await task_handle(client, sid).fetch_history()
        steps += [s for s in step_components(history, MODEL_ACTIVITIES) if "step" in s]
    return steps


def parts(steps: Sequence[dict[str, float]]) -> str:
    """Where a step's time went: each part's mean ms, largest first."""
    names = {k for s in steps for k in s if k != "step"}
    means = {k: statistics.fmean(s.get(k, 0.0) for s in steps) for k in names}
    top = sorted(means.items(), key=lambda kv: -kv[1])[:6]
    return ", ".join(f"{k} {v:.0f}" for k, v in top)


async def run(args: argparse.Namespace) -> int:
    for name, value in machine_facts():
        print(f"{name}: {value}")
    queue, run_id = f"noisy-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:6]
    flood_tenant, quiet_tenant = f"flood-{run_id}", f"quiet-{run_id}"
    async with bench_stack(fairness=args.fairness == "on") as (ep, res, state):
        workspace = state / "workspace"
        for tenant in (flood_tenant, quiet_tenant):
            # The worker runs with AGENT_WORKSPACE_SCOPE=tenant: one root per tenant.
            root = workspace / tenant / TENANT_DIR
            for i in range(dirs_needed(args.fanout, args.flood_steps, args.quiet_steps)):
                (root / f"d{i}").mkdir(parents=True)
                (root / f"d{i}" / "notes.md").write_text(f"directory {i}\n")
        worker = WorkerGroup(
            [
                NoisyWorkerProcess(
                    ep,
                    shape=(args.fanout, args.flood_steps, args.quiet_steps),
                    queue=queue,
                    workspace=workspace,
                    max_cached=args.max_cached,
                    log=state / "worker.log",
                    processes=args.forked,
                )
            ]
        )
        worker.start()
        try:
            await worker.wait_ready()
            client = await connect_client(
                ep.temporal_address,
                "default",
                data_converter=data_converter_with_offload(res.store),
            )
            return await measure(
                args, client, res, worker, state, queue, flood_tenant, quiet_tenant
            )
        finally:
            worker.stop()


async def measure(
    args: argparse.Namespace,
    client: Client,
    res: Resources,
    worker: WorkerGroup,
    state: Path,
    queue: str,
    flood_tenant: str,
    quiet_tenant: str,
) -> int:
    quiet_opts = TaskOptions(
        tenant_id=quiet_tenant, task_queue=queue, max_steps=args.quiet_steps + 2
    )
    flood_opts = TaskOptions(
        tenant_id=flood_tenant, task_queue=queue, max_steps=args.flood_steps + 2
    )
    print("phase: quiet", flush=True)
    cpu0 = CpuSnapshot.take(worker.pids, state)
    quiet = await run_tenant(client, res, quiet_opts, QUIET, args.quiet, args.quiet_concurrency)
    quiet_parts = await steps_of(client, quiet)
    quiet_steps = [s["step"] for s in quiet_parts]
    cpu1 = CpuSnapshot.take(worker.pids, state)
    print(f"  B alone: {summary(quiet_steps)}")
    print(f"  CPU: {cpu_between(cpu0, cpu1)}")

    print("phase: flood", flush=True)
    began = time.perf_counter()
    flooding = asyncio.create_task(start_flood(client, res, flood_opts, args.flood))
    await asyncio.sleep(args.head_start)
    during = await run_tenant(
        client, res, quiet_opts, QUIET, args.quiet, args.quiet_concurrency, first=args.quiet
    )
    b_done = time.perf_counter() - began
    cpu2 = CpuSnapshot.take(worker.pids, state)
    flood_ids = await flooding
    flood_done = sum(
        1
        for status in await all_of(50, flood_ids, lambda sid: _status(client, sid))
        if status == "COMPLETED"
    )
    flood_parts = await steps_of(client, during)
    flood_steps = [s["step"] for s in flood_parts]
    print(f"  B during A's flood: {summary(flood_steps)}")
    print(
        f"  B's tasks took {b_done:.1f} s from the flood's first start; A had {flood_done} "
        f"of {len(flood_ids)} tasks completed by then"
    )
    print(f"  CPU: {cpu_between(cpu1, cpu2)}")
    print("phase: drain", flush=True)
    results = await all_of(50, flood_ids, lambda sid: task_handle(client, sid).result())
    ended = sum(1 for r in results if r.status == "completed")
    drained = time.perf_counter() - began
    ratio = pct(flood_steps, 0.95) / pct(quiet_steps, 0.95)
    print()
    print(
        f"noisy neighbour: fairness {args.fairness}, A {args.flood} tasks x {args.flood_steps} "
        f"replies of {args.fanout} calls, B {args.quiet} tasks x {args.quiet_steps} steps "
        f"({args.quiet_concurrency} at a time), {args.forked} forked worker(s)"
    )
    print(f"  B quiet:          {summary(quiet_steps)}")
    print(f"    mean ms by part: {parts(quiet_parts)}")
    print(f"  B in A's flood:   {summary(flood_steps)}")
    print(f"    mean ms by part: {parts(flood_parts)}")
    print(f"  B's p95, flood / quiet: {ratio:.2f}x (target <= 2x)")
    print(f"  A: {ended}/{len(results)} completed, all in {drained:.1f} s from its first start")
    ok = ended == len(results)
    print(f"check {'ok  ' if ok else 'FAIL'} every task of both tenants completed")
    return 0 if ok else 1


async def _status(client: Client, session_id: str) -> str:
    described = await task_handle(client, session_id).describe()
    return described.status.name if described.status else "UNKNOWN"


def main() -> int:
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flood", type=int, default=500, help="tenant A's tasks (500)")
    parser.add_argument("--fanout", type=int, default=8, help="calls in each of A's replies (8)")
    parser.add_argument("--flood-steps", type=int, default=2, help="A's replies with calls (2)")
    parser.add_argument("--quiet", type=int, default=12, help="tenant B's tasks per phase (12)")
    parser.add_argument("--quiet-steps", type=int, default=5, help="B's steps per task (5)")
    parser.add_argument("--quiet-concurrency", type=int, default=3, help="B's tasks at once (3)")
    parser.add_argument(
        "--head-start", type=float, default=5.0, help="seconds of flood before B starts (5)"
    )
    parser.add_argument("--forked", type=int, default=2, help="forked worker processes (2)")
    parser.add_argument("--max-cached", type=int, default=None, help="per worker process")
    parser.add_argument("--fairness", choices=("on", "off"), default="on")
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
