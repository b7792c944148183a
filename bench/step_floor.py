"""The bare loop's floor: how a step's time changes with its activities' time, and how fast
a workflow task woken by a signal on an idle worker is handed over (docs/BENCHMARKS.md,
"Step latency against the bare loop").

    cd bench && ../.venv/bin/python step_floor.py

Both loops of compare_loops.py sit on the same ~50 ms half-step floor; this shows it with
activities that sleep d ms (d = 0 … 80), and that a lone workflow task is not delayed so.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
import uuid
import warnings
from datetime import timedelta
from pathlib import Path

from loop_report import Row, history_stats  # bench/ is on sys.path when run as a script
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from durable_agents.workers.stack.temporal import TemporalDevServer

STEPS = 40
SLEEPS_MS = (0, 10, 20, 30, 45, 60, 80)
TIMEOUT = timedelta(seconds=30)


@activity.defn(name="bare_model")  # the name loop_report counts steps by
async def sleepy_model(ms: int) -> int:
    await asyncio.sleep(ms / 1000)
    return ms


@activity.defn(name="bare_tool")
async def sleepy_tool(ms: int) -> int:
    await asyncio.sleep(ms / 1000)
    return ms


@workflow.defn(name="SleepyLoop")
class SleepyLoop:
    @workflow.run
    async def run(self, ms: int) -> int:
        for _ in range(STEPS):
            await workflow.execute_activity(sleepy_model, ms, start_to_close_timeout=TIMEOUT)
            await workflow.execute_activity(sleepy_tool, ms, start_to_close_timeout=TIMEOUT)
        await workflow.execute_activity(sleepy_model, ms, start_to_close_timeout=TIMEOUT)
        return ms


@workflow.defn(name="Poked")
class Poked:
    def __init__(self) -> None:
        self.pokes = 0

    @workflow.signal
    def poke(self) -> None:
        self.pokes += 1

    @workflow.run
    async def run(self, pokes: int) -> int:
        await workflow.wait_condition(lambda: self.pokes >= pokes)
        return pokes


async def sleepy_steps(client: Client, queue: str) -> None:
    print("| activity sleep ms | step p50 ms | step p95 ms | workflow-task queue ms (mean) |")
    print("|---|---|---|---|")
    for ms in SLEEPS_MS:
        row = Row("bare", f"sleep-{ms}", STEPS, 0)
        handle = await client.start_workflow(
            SleepyLoop.run, ms, id=f"sleepy-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        await handle.result()
        await history_stats(client, handle.id, handle.result_run_id or "", row)
        count, queued, _ = row.breakdown["(workflow task)"]
        print(f"| {ms} | {row.p50_ms:.1f} | {row.p95_ms:.1f} | {queued / count:.1f} |", flush=True)


async def poked_handover(client: Client, queue: str, pokes: int = 20) -> None:
    handle = await client.start_workflow(
        Poked.run, pokes, id=f"poked-{uuid.uuid4().hex[:8]}", task_queue=queue
    )
    await asyncio.sleep(1.0)
    for _ in range(pokes):
        await handle.signal(Poked.poke)
        await asyncio.sleep(0.3)  # the worker idle again before the next one
    await handle.result()
    scheduled: dict[int, float] = {}
    waits: list[float] = []
    for e in (await handle.fetch_history()).events:
        t = e.event_time.ToNanoseconds() / 1e6
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            scheduled[e.event_id] = t
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            waits.append(t - scheduled[e.workflow_task_started_event_attributes.scheduled_event_id])
    print(
        f"\nworkflow tasks woken by a signal on an idle worker ({len(waits) - 1} after the first):"
        f" queue median {statistics.median(waits[1:]):.1f} ms, max {max(waits[1:]):.1f} ms"
    )


async def main() -> None:
    state = Path(tempfile.mkdtemp(prefix="durable-agents-floor-"))
    server = TemporalDevServer(state / "temporal.db", port=0, fsync=False)
    try:
        await asyncio.to_thread(server.start)
        client = await Client.connect(server.address)
        queue = f"floor-{uuid.uuid4().hex[:8]}"
        async with Worker(
            client,
            task_queue=queue,
            workflows=[SleepyLoop, Poked],
            activities=[sleepy_model, sleepy_tool],
            # Nothing here is ours: the SDK's sandbox would only add its own run time.
            workflow_runner=UnsandboxedWorkflowRunner(),
        ):
            await sleepy_steps(client, queue)
            await poked_handover(client, queue)
        await asyncio.sleep(0.5)  # the SDK's interpreter-exit trap after a worker stops
    finally:
        await asyncio.to_thread(server.stop)
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    asyncio.run(main())
