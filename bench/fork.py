"""Fork: what forking a long session costs, in time, PostgreSQL rows and S3 bytes.

Fills one completed session of N steps on a throwaway embedded stack (real PostgreSQL, S3
and Temporal), each step a model reply, a tool call and a stored result of R bytes
(distinct, so N·R bytes in S3), as the loop writes them; then forks it at step AT through
the one service (TaskService.fork: the checks, one transaction, the workflow's start) and
reports the fork's wall time, the rows and logical bytes it added to PostgreSQL (every
table, counted with pg_column_size; indexes not included), and the objects and bytes it
added to S3. No worker runs: the fork's workflow is started, not run. With --edit-bytes N
each fork also edits the result its step reads (step AT-1's call) to N bytes of text.

    .venv/bin/python bench/fork.py [--steps 100] [--result-bytes 1048576] [--at 90] [--edit-bytes 0]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import statistics
import time
import uuid
import warnings
from typing import Any

from sqlalchemy import text
from throwaway_stack import bench_stack  # bench/ is on sys.path when run as a script

from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.items import NewItem
from durable_agents.storage.tool_results import ToolResult, VerifiedArtifact, commit_tool_result
from durable_agents.workers.client.commands import Caller
from durable_agents.workers.client.forks import ForkRequest
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.resources import Resources
from durable_agents.workers.temporal_client import connect_client

TENANT = "bench"
TABLES = "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"


def result_bytes(step: int, size: int) -> bytes:
    """`size` bytes of distinct seeded text for a step's result."""
    out, block = bytearray(), 0
    while len(out) < size:
        out += hashlib.shake_256(f"{step}:{block}".encode()).hexdigest(4096).encode()
        block += 1
    return bytes(out[:size])


async def fill(res: Resources, steps: int, size: int) -> uuid.UUID:
    """A completed session: the task, then per step a reply, its call and its stored result."""
    sid = uuid.uuid4()
    wf = f"agent-{sid}"
    async with agent_state(res.sessions, TENANT, write=True) as st:
        await st.sessions.create(sid, title="bench", model_config={}, workflow_id=wf)
        await st.items.append(NewItem(sid, "user_message", "user", f"{wf}:task", text="go"))
    for step in range(steps):
        data = result_bytes(step, size)
        ref = await res.store.put(TENANT, data, "text/plain")
        call = f"call_{step}_0"
        async with agent_state(res.sessions, TENANT, write=True) as st:
            await st.items.append_many(
                [
                    NewItem(sid, "assistant_message", "assistant", f"{wf}:{step}:model",
                            data={"step": step}),
                    NewItem(sid, "tool_call", "assistant", f"{wf}:{step}:{call}:call",
                            tool_call_id=call, tool_name="read_file",
                            data={"step": step, "arguments": {"path": f"f{step}"}}),
                ]
            )  # fmt: skip
            result = ToolResult(
                sid, call, "read_file", step, f"{wf}:{step}:{call}",
                artifact=VerifiedArtifact(ref, data),
            )  # fmt: skip
            await commit_tool_result(st.db, TENANT, result, store=res.store)
    async with agent_state(res.sessions, TENANT, write=True) as st:
        await st.sessions.set_status(sid, "completed")
    return sid


async def table_rows(res: Resources) -> dict[str, tuple[int, int]]:
    """(rows, logical bytes) of every table."""
    found: dict[str, tuple[int, int]] = {}
    async with res.engine.connect() as conn:
        for name in await conn.scalars(text(TABLES)):
            row = (
                await conn.execute(
                    text(f'SELECT count(*), coalesce(sum(pg_column_size(t.*)), 0) FROM "{name}" t')
                )
            ).one()
            found[str(name)] = (int(row[0]), int(row[1]))
    return found


async def s3_objects(res: Resources) -> tuple[int, int]:
    s3: Any = res.store.client
    count = size = 0
    paginator = s3.get_paginator("list_objects_v2")
    async for page in paginator.paginate(Bucket=res.store.bucket):
        for obj in page.get("Contents", []):
            count, size = count + 1, size + int(obj["Size"])
    return count, size


async def run(steps: int, size: int, at: int, forks: int, edit_bytes: int) -> None:
    async with bench_stack() as (ep, res, state):
        t0 = time.perf_counter()
        parent = await fill(res, steps, size)
        print(f"filled 1 session x {steps} steps x {size} B in {time.perf_counter() - t0:.1f}s")
        settings = ep.settings(workspace=state, task_queue="bench", provider="offline")
        client = await connect_client(ep.temporal_address, "default")
        service = TaskService(client, res.sessions, res.store, settings)
        caller = Caller.operator(TENANT)
        edits = {f"call_{at - 1}_0": "e" * edit_bytes} if edit_bytes else {}
        request = ForkRequest(str(parent), at, results=edits)
        # One fork to warm the connection pools and statement caches, not counted.
        await service.fork(caller, request)
        times, added_rows, added_bytes, objects, s3_bytes = [], [], [], [], []
        for _ in range(forks):
            rows_before, s3_before = await table_rows(res), await s3_objects(res)
            began = time.perf_counter()
            await service.fork(caller, request)
            times.append((time.perf_counter() - began) * 1000)
            rows_after, s3_after = await table_rows(res), await s3_objects(res)
            grown = {
                t: (rows_after[t][0] - rows_before[t][0], rows_after[t][1] - rows_before[t][1])
                for t in rows_after
                if rows_after[t] != rows_before.get(t)
            }
            added_rows.append(sum(n for n, _ in grown.values()))
            added_bytes.append(sum(b for _, b in grown.values()))
            objects.append(s3_after[0] - s3_before[0])
            s3_bytes.append(s3_after[1] - s3_before[1])
        edited = f", one result edited to {edit_bytes} B" if edit_bytes else ""
        print(
            f"fork at step {at}{edited}: wall ms p50 {statistics.median(times):.1f}  "
            f"max {max(times):.1f}"
        )
        print(f"  new PostgreSQL rows per fork: {max(added_rows)} ({max(added_bytes)} B logical)")
        print(
            "  by table (last fork):", ", ".join(f"{t} +{n} ({b} B)" for t, (n, b) in grown.items())
        )
        print(f"  new S3 objects per fork: {max(objects)} ({max(s3_bytes)} B)")


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--result-bytes", type=int, default=1024 * 1024)
    parser.add_argument("--at", type=int, default=90)
    parser.add_argument("--forks", type=int, default=5)
    parser.add_argument("--edit-bytes", type=int, default=0)
    args = parser.parse_args()
    asyncio.run(run(args.steps, args.result_bytes, args.at, args.forks, args.edit_bytes))
