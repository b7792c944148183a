"""Cold tier: what archiving idle sessions frees in PostgreSQL, and what it costs.

Fills N completed sessions of ~200 items each (tool results backed by S3 artifacts, a user
message every 20 items) on a throwaway embedded stack (real PostgreSQL and S3), backdates
them past the idle threshold, archives them with archive_idle_sessions, then rehydrates each.
Prints hot-table bytes before/after (and after VACUUM FULL, since deleted rows keep their
pages until vacuumed), archive index and snapshot bytes, and archive/rehydrate latencies.

    .venv/bin/python bench/cold_tier.py [--sessions 50] [--items 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
import warnings
from datetime import timedelta

from sqlalchemy import func, select, text, update
from throwaway_stack import bench_stack  # bench/ is on sys.path when run as a script

from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.archive import archive_idle_sessions, archive_session, rehydrate_session
from durable_agents.storage.db import make_engine
from durable_agents.storage.items import NewItem
from durable_agents.storage.models import ItemRow, SessionArchiveRow, SessionRow
from durable_agents.workers.resources import Resources

TENANT = "bench"
HOT_BYTES = (
    "SELECT pg_total_relation_size('items') + pg_total_relation_size('turns')"
    " + pg_total_relation_size('compactions')"
)


async def fill(res: Resources, n_items: int) -> uuid.UUID:
    """A completed session: user message every 20 items, else assistant → call → result."""
    sid = uuid.uuid4()
    async with agent_state(res.sessions, TENANT, write=True) as st:
        await st.sessions.create(sid, title="bench", model_config={})
    refs = [await res.store.put(TENANT, (f"result {k} " * 600).encode()) for k in range(8)]
    async with agent_state(res.sessions, TENANT, write=True) as st:
        artifacts = st.artifacts
        ids = []
        for r in refs:
            aid = await artifacts.register(r, uri=res.store.uri(r))
            await artifacts.add_ref(
                aid, owner_type="checkpoint", owner_id=str(sid), required_for_resume=True
            )
            ids.append(aid)
        items = st.items
        for n in range(n_items):
            key = f"{sid}:{n}"
            if n % 20 == 0:
                item = NewItem(sid, "user_message", "user", key, text=f"request {n} " * 20)
            elif n % 3 == 1:
                calls = {"tool_calls": [{"id": f"c{n}", "name": "read_file"}]}
                item = NewItem(sid, "assistant_message", "assistant", key, "calling", data=calls)
            elif n % 3 == 2:
                item = NewItem(
                    sid, "tool_call", "assistant", key, tool_call_id=f"c{n - 1}",
                    tool_name="read_file", data={"arguments": {"path": f"src/{n}.py"}},
                )  # fmt: skip
            else:
                ref = refs[n % len(refs)]
                item = NewItem(
                    sid, "tool_result", "tool", key, text="result body preview " * 20,
                    tool_call_id=f"c{n - 2}", tool_name="read_file",
                    artifact_id=ids[n % len(refs)],
                    data={"artifact": {"sha256": ref.sha256, "size_bytes": ref.size_bytes}},
                )  # fmt: skip
            await items.append(item)
        await st.sessions.set_status(sid, "completed")
    return sid


async def scalar(res: Resources, sql: str) -> int:
    async with res.engine.connect() as conn:
        return int(await conn.scalar(text(sql)) or 0)


async def vacuum_full(owner_url: str) -> None:
    # VACUUM FULL is the tables' owner's: the workers' role may only read and write rows.
    engine = make_engine(owner_url)
    try:
        async with engine.connect() as conn:
            auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
            for table in ("items", "turns", "compactions"):
                await auto.execute(text(f"VACUUM FULL {table}"))
    finally:
        await engine.dispose()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


async def run(res: Resources, owner_url: str, n_sessions: int, n_items: int) -> None:
    t0 = time.perf_counter()
    ids = [await fill(res, n_items) for _ in range(n_sessions)]
    print(f"filled {n_sessions} sessions x {n_items} items in {time.perf_counter() - t0:.1f}s")
    async with res.sessions() as db, db.begin():
        await db.execute(
            update(SessionRow)
            .where(SessionRow.id.in_(ids))
            .values(updated_at=func.now() - timedelta(days=30))
        )
    await vacuum_full(owner_url)  # a compact baseline, comparable with the vacuumed "after"
    hot_before = await scalar(res, HOT_BYTES)

    archive_ms = []
    for sid in ids:
        began = time.perf_counter()
        await archive_session(res.sessions, res.store, TENANT, sid)
        archive_ms.append((time.perf_counter() - began) * 1000)
    # Everything is archived now, so the sweep finds nothing left to do.
    leftover = await archive_idle_sessions(
        res.sessions, res.store, TENANT, idle_for=timedelta(days=1), limit=n_sessions
    )
    hot_after = await scalar(res, HOT_BYTES)
    await vacuum_full(owner_url)
    hot_vacuumed = await scalar(res, HOT_BYTES)
    index_bytes = await scalar(res, "SELECT pg_total_relation_size('session_archives')")
    async with res.sessions() as db:
        snapshot_bytes = int(
            await db.scalar(select(func.sum(SessionArchiveRow.snapshot_bytes))) or 0
        )

    rehydrate_ms = []
    for sid in ids:
        began = time.perf_counter()
        await rehydrate_session(res.sessions, res.store, TENANT, sid)
        rehydrate_ms.append((time.perf_counter() - began) * 1000)
    async with res.sessions() as db:
        restored = int(await db.scalar(select(func.count()).select_from(ItemRow)) or 0)

    mib = 1024 * 1024
    print(f"hot tables (items+turns+compactions) before archive: {hot_before / mib:8.2f} MiB")
    print(f"  after archive, before vacuum:                      {hot_after / mib:8.2f} MiB")
    print(f"  after archive + VACUUM FULL:                       {hot_vacuumed / mib:8.2f} MiB")
    print(f"archive index (session_archives, with its index):    {index_bytes / 1024:8.1f} KiB")
    print(
        f"snapshots in S3: {snapshot_bytes / mib:.2f} MiB total, "
        f"{snapshot_bytes / n_sessions / 1024:.1f} KiB per session"
    )
    print(
        f"archive ms/session: mean {statistics.mean(archive_ms):.1f}  "
        f"p50 {pct(archive_ms, 0.5):.1f}  p95 {pct(archive_ms, 0.95):.1f}"
    )
    print(
        f"rehydrate ms/session: mean {statistics.mean(rehydrate_ms):.1f}  "
        f"p50 {pct(rehydrate_ms, 0.5):.1f}  p95 {pct(rehydrate_ms, 0.95):.1f}"
    )
    print(
        f"checks: idle sweep left {len(leftover.archived)} to archive; "
        f"{restored} of {n_sessions * n_items} items restored"
    )


async def main(n_sessions: int, n_items: int) -> None:
    async with bench_stack() as (ep, res, _):
        await run(res, ep.database_migration_url, n_sessions, n_items)


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--items", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.sessions, args.items))
