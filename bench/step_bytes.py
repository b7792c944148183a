"""Where a step's bytes go besides the tool result: per PostgreSQL relation (heap, TOAST,
each index), per items kind and column, and per Temporal history event type.

Runs our loop once (compare_loops.run_ours: N calls of read_file on R-byte seeded files) on a
throwaway embedded stack, then reads the database and the history.

    cd bench && ../.venv/bin/python step_bytes.py [--variant 20kb]
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
import warnings
from collections import defaultdict

from compare_loops import VARIANTS, run_ours, warm_up
from loop_report import Row, bucket_bytes, pg_tables
from sqlalchemy import text
from temporalio.api.enums.v1 import EventType
from throwaway_stack import bench_stack  # bench/ is on sys.path when run as a script

from durable_agents.workers.resources import Resources
from durable_agents.workers.temporal_client import connect_client

RELATIONS = """
SELECT c.relname, c.relkind, pg_relation_size(c.oid) FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname IN ('public', 'pg_toast') AND c.relkind IN ('r', 'i', 't')
"""

ITEM_COLUMNS = """
SELECT kind, count(*), sum(pg_column_size(i.*)), sum(pg_column_size(data)),
       sum(pg_column_size(text)), sum(pg_column_size(idempotency_key))
FROM items i GROUP BY kind ORDER BY kind
"""


async def relation_sizes(res: Resources) -> dict[str, int]:
    async with res.sessions() as db:
        rows = (await db.execute(text(RELATIONS))).all()
    return {f"{name} ({kind})": int(size) for name, kind, size in rows}


async def report(res: Resources, before: dict[str, int], calls: int) -> None:
    after = await relation_sizes(res)
    growth = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
    print(f"PostgreSQL relation growth (r heap, t TOAST, i index), bytes per call of {calls}:")
    for name, n in sorted(growth.items(), key=lambda kv: -kv[1]):
        print(f"  {name:55s} {n:>10,}  {n / calls:>8.0f}")
    async with res.sessions() as db:
        print("items per kind: rows, avg row bytes, avg data, avg text, avg idempotency key")
        for kind, count, row, data, txt, key in (await db.execute(text(ITEM_COLUMNS))).all():
            print(
                f"  {kind:20s} {count:5d} {row / count:8.0f} {data / count:8.0f}"
                f" {txt / count:8.0f} {key / count:8.0f}"
            )
        sample = (
            await db.execute(
                text(
                    "SELECT kind, data::text FROM items WHERE ordinal IN (2, 3, 4)"
                    " ORDER BY ordinal LIMIT 3"
                )
            )
        ).all()
        for kind, data in sample:
            print(f"  sample {kind}: {data[:600]}")


async def history_report(client: object, workflow_id: str, calls: int) -> None:
    handle = client.get_workflow_handle(workflow_id)  # type: ignore[attr-defined]
    history = await handle.fetch_history()
    by_type: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for e in history.events:
        name = EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")
        attrs = e.activity_task_scheduled_event_attributes
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name += f" {attrs.activity_type.name}"
        payload = sum(
            p.ByteSize()
            for field in ("input", "result")
            for a in [
                attrs,
                e.activity_task_completed_event_attributes,
                e.workflow_execution_started_event_attributes,
                e.workflow_execution_completed_event_attributes,
            ]
            if hasattr(a, field) and a.HasField(field)
            for p in getattr(a, field).payloads
        )
        entry = by_type[name]
        entry[0] += 1
        entry[1] += e.ByteSize()
        entry[2] += payload
    total = sum(v[1] for v in by_type.values())
    print(
        f"history events: {len(history.events)}, {total:,} bytes of events ({total / calls:.0f}"
        " per call); per type: count, bytes, of which payload bytes, per call"
    )
    for name, (count, size, payload) in sorted(by_type.items(), key=lambda kv: -kv[1][1]):
        print(f"  {name:55s} {count:5d} {size:>9,} {payload:>9,} {size / calls:>7.0f}")


async def main(args: argparse.Namespace) -> None:
    calls, size = VARIANTS[args.variant]
    async with bench_stack() as (ep, res, state):
        client = await connect_client(ep.temporal_address, "default")
        if args.warm:
            await warm_up(client, res, ep, state, 900.0)
        before, pg0, s30 = (
            await relation_sizes(res),
            await pg_tables(res, False),
            await bucket_bytes(res),
        )
        row = Row("ours", args.variant, calls, size)
        await run_ours(client, res, ep, state, row, False, 900.0)
        pg = sum((await pg_tables(res, False)).values()) - sum(pg0.values())
        s3 = await bucket_bytes(res) - s30
        print(
            f"{args.variant}: {row.ended}; history {row.history_bytes:,} PG {pg:,} S3 {s3:,};"
            f" total/(done*R) {((row.history_bytes or 0) + pg + s3) / (row.done * size):.3f}"
        )
        await report(res, before, calls)  # items per kind: all sessions, the warm-up's too
        async with res.sessions() as db:
            sid = (
                await db.execute(text("SELECT id FROM sessions ORDER BY created_at DESC LIMIT 1"))
            ).scalar_one()
        await history_report(client, f"agent-{uuid.UUID(str(sid))}", calls)


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="20kb", choices=list(VARIANTS))
    parser.add_argument("--warm", action="store_true", help="run an unmeasured session first")
    asyncio.run(main(parser.parse_args()))
