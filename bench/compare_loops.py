"""One ReAct workload, three ways: naive Temporal, LangGraph + PostgresSaver, durable-agents.

Workload: N model calls with a deterministic fake model; each returns one tool call whose
result is R bytes of distinct seeded text (`--repeat`: the same text every time). All three
run in one process against one throwaway embedded stack (Temporal dev server, PostgreSQL,
SeaweedFS). Per system it reports calls completed, how the run ended, Temporal history bytes
and events, PostgreSQL bytes (pg_total_relation_size delta of the system's tables),
object-store bytes (bucket listing delta), wall time and p50/p95 step latency (one step =
one model call and its tool call, measured from one model call's start to the next).

    .venv/bin/python bench/compare_loops.py                        # all variants
    .venv/bin/python bench/compare_loops.py --variant 20kb --variant 100kb
    .venv/bin/python bench/compare_loops.py --systems ours,bare --repeat

Needs the `bench` extra (langgraph, langgraph-checkpoint-postgres, psycopg) for the LangGraph
column; without it that column is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import traceback
import uuid
import warnings
from pathlib import Path

from loop_report import (
    Row,
    breakdown_table,
    bucket_bytes,
    completed_activities,
    grown,
    history_stats,
    percentiles,
    pg_tables,
    stall_reason,
    table,
)
from naive_temporal import (
    BareLoopWorkflow,
    NaiveAgentWorkflow,
    NaiveInput,
    bare_model,
    bare_tool,
    naive_model,
    naive_tool,
    seeded_text,
)
from sqlalchemy import text
from step_tail import tail_table
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.worker import Worker
from throwaway_stack import bench_stack  # bench/ is on sys.path when run as a script

from durable_agents.activities.providers.scripted import ScriptedProvider
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.storage.workspaces import TENANT_DIR
from durable_agents.workers.client.tasks import TaskOptions, start_task
from durable_agents.workers.process.cloud import (
    build_cloud_worker,
    cloud_activities,
    running,
    worker_slots,
)
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from durable_agents.workers.temporal_client import connect_client

VARIANTS = {
    "smoke": (10, 5_000),
    "20kb": (100, 20_000),
    "100kb": (200, 100_000),
    "1mb": (100, 1_000_000),
    "1mb-short": (20, 1_000_000),
}
DEFAULT_VARIANTS = ["20kb", "100kb", "1mb"]
SYSTEMS = ("naive", "langgraph", "ours", "bare")


async def run_naive(
    client: Client, queue: str, row: Row, repeat: bool, stall_seconds: float
) -> None:
    wid = f"naive-{row.variant}-{uuid.uuid4().hex[:8]}"
    began = time.perf_counter()
    handle = await client.start_workflow(
        NaiveAgentWorkflow.run, NaiveInput(row.calls, row.size, repeat), id=wid, task_queue=queue
    )
    result = asyncio.ensure_future(handle.result())
    length, last_progress = 0, time.perf_counter()
    while True:
        done, _ = await asyncio.wait({result}, timeout=1.0)
        if done:
            try:
                result.result()
                row.ended = "completed"
            except WorkflowFailureError as err:
                row.ended = f"failed: {err.cause}"[:200]
            break
        desc = await handle.describe()
        if desc.status == WorkflowExecutionStatus.COMPLETED:
            row.ended = "completed"
            break
        if desc.status != WorkflowExecutionStatus.RUNNING:
            row.ended = f"{desc.status.name.lower() if desc.status else '?'} by server"
            break
        if desc.history_length != length:
            length, last_progress = desc.history_length, time.perf_counter()
        elif time.perf_counter() - last_progress > stall_seconds:
            row.ended = f"stalled (> {stall_seconds:g}s): " + await stall_reason(client, wid)
            await handle.terminate("bench: stalled")
            break
    if not result.done():
        result.cancel()
    row.wall_s = (last_progress if row.ended.startswith("stalled") else time.perf_counter()) - began
    if not row.ended.startswith("stalled"):
        # Terminated by the server, e.g. at the history size limit: say so, with its reason.
        last = (await handle.fetch_history()).events[-1]
        if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
            reason = last.workflow_execution_terminated_event_attributes.reason
            row.ended = f"terminated by server: {reason}"
    await history_stats(client, wid, handle.result_run_id or "", row)
    row.done = completed_activities(await handle.fetch_history(), "naive_tool")


async def run_bare(client: Client, queue: str, row: Row) -> None:
    wid = f"bare-{row.variant}-{uuid.uuid4().hex[:8]}"
    began = time.perf_counter()
    handle = await client.start_workflow(BareLoopWorkflow.run, row.calls, id=wid, task_queue=queue)
    row.done = await asyncio.wait_for(handle.result(), 600)
    row.wall_s, row.ended = time.perf_counter() - began, "completed"
    await history_stats(client, wid, handle.result_run_id or "", row)


async def run_ours(
    client: Client,
    res: Resources,
    ep: StackEndpoints,
    state: Path,
    row: Row,
    repeat: bool,
    limit_s: float,
) -> None:
    workspace = state / f"ws-{uuid.uuid4().hex[:8]}"
    tenant = f"bench-{row.variant}"
    # The worker runs with the tenant-shared workspace scope: every session reads these files.
    files = workspace / tenant / TENANT_DIR
    (files / "r").mkdir(parents=True)
    # Texts of their own per variant and per latency round: the worker process caches token
    # counts, and seeded texts of one seed are prefixes of each other across sizes.
    seed = f"ours:{row.variant}"
    for i in range(row.calls):
        content = seeded_text(i, row.size, repeat=repeat, seed=seed)
        (files / "r" / f"{i:04d}.txt").write_text(content)
    turns = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": f"r/{i:04d}.txt"}}]}
        for i in range(row.calls)
    ]
    provider = ScriptedProvider.from_data(turns)
    queue = f"ours-{uuid.uuid4().hex[:8]}"
    settings = ep.settings(workspace=workspace, task_queue=queue, provider="scripted")
    settings.agent = settings.agent.model_copy(update={"workspace_scope": "tenant"})
    worker = build_cloud_worker(
        client,
        cloud_activities(settings, res, provider, default_registry()),
        task_queue=queue,
        slots=worker_slots(settings.agent),  # as a deployed worker takes its tasks
    )
    options = TaskOptions(tenant_id=tenant, max_steps=row.calls + 5, task_queue=queue)
    async with running(worker):
        began = time.perf_counter()
        handle = await start_task(client, res.sessions, "Read every file under r/.", options)
        try:
            result = await asyncio.wait_for(handle.result(), limit_s)
            row.ended = f"{result.status} ({result.steps} steps)"
        except TimeoutError:
            row.ended = f"timed out after {limit_s:g}s"
            await handle.terminate("bench: timeout")
        except WorkflowFailureError as err:
            row.ended = f"failed: {err.cause}"[:200]
        row.wall_s = time.perf_counter() - began
    sid = handle.id.removeprefix("agent-")
    async with res.sessions() as db:
        row.done = int(
            (
                await db.execute(
                    text(
                        "SELECT count(*) FROM items WHERE session_id = :sid"
                        " AND kind = 'tool_result'"
                    ),
                    {"sid": uuid.UUID(sid)},
                )
            ).scalar_one()
        )
    first_run = handle.first_execution_run_id or handle.result_run_id or ""
    await history_stats(client, handle.id, first_run, row)


async def warm_up(
    client: Client, res: Resources, ep: StackEndpoints, state: Path, limit_s: float
) -> None:
    """One unmeasured session of ours, long enough to compact: a database in use has the
    first pages of every table and index, a fresh one allocates them (8 KB each) for the
    first session measured."""
    print("-- warm-up: one ours session of 30 x 20,000 B (not measured)", flush=True)
    await run_ours(client, res, ep, state, Row("ours", "warm-up", 30, 20_000), False, limit_s)


async def run_langgraph_row(
    ep: StackEndpoints, row: Row, repeat: bool, limit_s: float, durability: str
) -> None:
    from langgraph_loop import run_langgraph  # optional dependency: imported only when used

    row.system = f"langgraph/{durability}"
    starts: list[float] = []
    began = time.perf_counter()
    try:
        await asyncio.wait_for(
            run_langgraph(
                # LangGraph's saver creates its own tables (setup() on every run): the owner.
                ep.database_migration_url,
                f"lg-{uuid.uuid4().hex[:8]}",
                row.calls,
                row.size,
                repeat,
                starts,
                durability,
            ),
            limit_s,
        )
        row.ended = "completed"
    except TimeoutError:
        row.ended = f"timed out after {limit_s:g}s"
    row.wall_s = time.perf_counter() - began
    row.done = max(0, min(row.calls, len(starts) - 1))
    row.p50_ms, row.p95_ms = percentiles(starts)


async def latency_rounds(
    client: Client,
    res: Resources,
    ep: StackEndpoints,
    state: Path,
    queue: str,
    rounds: int,
    rows: list[Row],
    size: int = 1_000,
) -> None:
    """Our loop vs the bare two-activity loop, alternated so both see the same machine load:
    per round a bare run and one of ours (50 calls, `size`-byte results); then the median
    p50s and p95s over the rounds, and where the slow steps' time goes against a typical
    step's (bench/step_tail.py)."""
    ours_rows: list[Row] = []
    bare_rows: list[Row] = []
    for k in range(rounds):
        bare = Row("bare", f"latency-{k + 1}", 50, size)
        await run_bare(client, queue, bare)
        ours = Row("ours", f"latency-{k + 1}", 50, size)
        await run_ours(client, res, ep, state, ours, False, 600)
        rows.extend([bare, ours])
        bare_rows.append(bare)
        ours_rows.append(ours)
        print("\n".join(table([bare, ours]).splitlines()[-2:]), flush=True)
    for label, pick, target in (("p50", 0, 1.1), ("p95", 1, 1.2)):
        mine = statistics.median((r.p50_ms, r.p95_ms)[pick] or 0.0 for r in ours_rows)
        floor = statistics.median((r.p50_ms, r.p95_ms)[pick] or 0.0 for r in bare_rows)
        print(
            f"step {label}, median of {rounds} rounds: ours {mine:.1f} ms, bare {floor:.1f} ms,"
            f" ratio {mine / floor:.2f}x (target <= {target}x)"
        )
    print(
        tail_table(
            {
                "bare": [s for r in bare_rows for s in r.steps],
                "ours": [s for r in ours_rows for s in r.steps],
            }
        ),
        flush=True,
    )


# -- driver -------------------------------------------------------------------------------


async def main(args: argparse.Namespace) -> None:
    systems = [s for s in args.systems.split(",") if s]
    if "langgraph" in systems:
        try:
            import langgraph_loop  # noqa: F401
        except ImportError as err:
            print(f"LangGraph column skipped: {err} (pip install -e '.[bench]')")
            systems.remove("langgraph")
    lg_setup = "langgraph" in systems
    rows: list[Row] = []
    async with bench_stack() as (ep, res, state):
        client = await connect_client(ep.temporal_address, "default")
        if lg_setup:  # create the checkpoint tables first: their empty size is not the run's
            from langgraph_loop import setup_langgraph

            await setup_langgraph(ep.database_migration_url)
        naive_queue = "naive"
        naive_worker = Worker(
            client,
            task_queue=naive_queue,
            workflows=[NaiveAgentWorkflow, BareLoopWorkflow],
            activities=[naive_model, naive_tool, bare_model, bare_tool],
        )
        async with running(naive_worker):
            if args.warm and "ours" in systems:
                await warm_up(client, res, ep, state, args.timeout)
            for variant in [] if args.latency_only else args.variant or DEFAULT_VARIANTS:
                calls, size = VARIANTS[variant]
                for system in systems:
                    row = Row(system, variant, calls, size)
                    lg = system == "langgraph"
                    pg0, s30 = await pg_tables(res, lg), await bucket_bytes(res)
                    print(f"-- {variant}: {system} ...", flush=True)
                    try:
                        if system == "naive":
                            await run_naive(client, naive_queue, row, args.repeat, args.stall)
                        elif system == "bare":
                            await run_bare(client, naive_queue, row)
                        elif system == "ours":
                            await run_ours(client, res, ep, state, row, args.repeat, args.timeout)
                        else:
                            await run_langgraph_row(
                                ep, row, args.repeat, args.timeout, args.langgraph_durability
                            )
                    except Exception as err:
                        traceback.print_exc()
                        row.ended = f"bench error: {type(err).__name__}: {err}"[:200]
                    if system in ("langgraph", "ours"):
                        row.pg_growth = grown(pg0, await pg_tables(res, lg))
                        row.pg_bytes = sum(row.pg_growth.values())
                        row.s3_bytes = await bucket_bytes(res) - s30
                    rows.append(row)
                    print(table([row]).splitlines()[-1], flush=True)
            if args.latency_rounds:
                await latency_rounds(
                    client,
                    res,
                    ep,
                    state,
                    naive_queue,
                    args.latency_rounds,
                    rows,
                    args.latency_size,
                )
    print()
    print(f"langgraph durability={args.langgraph_durability}")
    print(f"repeat={args.repeat}; total = history + PG + S3 bytes, over done calls x R")
    print(table(rows))
    print()
    print("Where a step's time goes (history event times; per completed call):")
    print(breakdown_table([r for r in rows if r.breakdown]))
    print()
    print("PostgreSQL growth per table (bytes):")
    for r in rows:
        if r.pg_growth:
            tables = sorted(r.pg_growth.items(), key=lambda kv: -kv[1])
            print(f"  {r.variant} {r.system}: " + ", ".join(f"{t} {n:,}" for t, n in tables))


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", action="append", choices=list(VARIANTS))
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated")
    parser.add_argument("--repeat", action="store_true", help="every tool result the same text")
    parser.add_argument("--stall", type=float, default=30.0, help="naive: no-progress seconds")
    parser.add_argument(
        "--latency-rounds", type=int, default=0, help="also: ours vs bare step latency, K rounds"
    )
    parser.add_argument(
        "--langgraph-durability",
        choices=["sync", "async", "exit"],
        default="sync",
        help="LangGraph's durability mode (its own default is async)",
    )
    parser.add_argument(
        "--latency-size", type=int, default=1_000, help="result bytes in the latency rounds"
    )
    parser.add_argument("--latency-only", action="store_true", help="skip the variants")
    parser.add_argument(
        "--warm", action="store_true", help="run one unmeasured session of ours first"
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="per-run wall limit")
    asyncio.run(main(parser.parse_args()))
