"""What one tool call's read-back costs as its session grows, with the ORDER BY ordinal it
had and without it (docs/BENCHMARKS.md, "The tool-call read").

`ItemRepository.for_tool_call` reads a call's items on every approval and every tool run.
With ORDER BY ordinal in the statement the planner may walk the session's (session,
ordinal) index in order and filter on the call, reading every item of the session; without
it, the repository sorts the call's few rows itself. For each session length both
statements run on the same rows: the plan, the buffers it touched, its median time on the
server, and the plan a prepared statement may settle on (a generic plan, for any values).
"ordered, sort off" rules sorting out, which leaves the ordered statement only that walk:
what the walk costs wherever the planner picks it.

    .venv/bin/python bench/tool_call_read.py
    .venv/bin/python bench/tool_call_read.py --sizes 3000 --background 0 --stats none
"""

from __future__ import annotations

import argparse
import asyncio
import re
import uuid
import warnings

from sqlalchemy import Select, text
from sqlalchemy.dialects.postgresql import asyncpg
from throwaway_stack import bench_stack  # bench/ is on sys.path as a script

from durable_agents.storage.db import make_engine
from durable_agents.storage.items import _FOR_TOOL_CALL
from durable_agents.storage.models import ItemRow
from durable_agents.workers.resources import Resources

TENANT = "bench"
EVERY = 10  # a call and its result in every EVERY items, ids as ours (`call_{step}_0`)
BACKGROUND_ITEMS = 6  # each of the short sessions around the long ones
STATS = {
    "short": "taken while every session was short",
    "fresh": "taken after the sessions grew",
    "none": "never taken (a new database, or autovacuum has not come round)",
}
STATEMENTS: dict[str, tuple[Select[ItemRow], bool]] = {
    "ordered": (_FOR_TOOL_CALL.order_by(ItemRow.ordinal), False),
    "ordered, sort off": (_FOR_TOOL_CALL.order_by(ItemRow.ordinal), True),
    "as the repository": (_FOR_TOOL_CALL, False),
}
_SESSION = text(
    "INSERT INTO sessions (id, tenant_id, title, status, model_config, next_ordinal)"
    " VALUES (:s, :t, 'bench', 'running', '{}', :n + 1)"
)
_ITEMS = text(
    "INSERT INTO items (id, tenant_id, session_id, ordinal, kind, role, text, data,"
    " idempotency_key, tool_call_id)"
    " SELECT gen_random_uuid(), :t, :s, g, 'assistant_message', 'assistant', '', '{}',"
    " :k || ':' || g, CASE WHEN g % :every IN (1, 2) THEN 'call_' || (g / :every) || '_0' END"
    " FROM generate_series(1, :n) AS g"
)


async def add_session(res: Resources, items: int) -> uuid.UUID:
    sid = uuid.uuid4()
    async with res.sessions() as db, db.begin():
        await db.execute(_SESSION, {"s": sid, "t": TENANT, "n": items})
        await db.execute(_ITEMS, {"s": sid, "k": str(sid), "t": TENANT, "n": items, "every": EVERY})
    return sid


async def analyze(owner_url: str) -> None:
    """As the table's owner: the application's role may not ANALYZE it."""
    engine = make_engine(owner_url)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("ANALYZE items"))
            await conn.commit()
    finally:
        await engine.dispose()


async def measure(
    res: Resources,
    stmt: Select[ItemRow],
    sid: uuid.UUID,
    call: str,
    runs: int,
    *,
    no_sort: bool,
) -> dict[str, str]:
    """The plan of one read (planned afresh each run: EXPLAIN is not a prepared plan), its
    median server time over `runs`, and the generic plan of the same statement."""
    bound = stmt.params(in_session=sid, in_tenant=TENANT, in_call=call)
    prepared = stmt.compile(dialect=asyncpg.dialect())  # type: ignore[no-untyped-call]
    async with res.sessions() as db:
        if no_sort:
            await db.execute(text("SET LOCAL enable_sort = off"))
        compiled = bound.compile(db.bind, compile_kwargs={"literal_binds": True})
        plans = [
            "\n".join(await db.scalars(text(f"EXPLAIN (ANALYZE, BUFFERS) {compiled}")))
            for _ in range(runs)
        ]
        await db.execute(text(f"PREPARE for_call(uuid, varchar, varchar) AS {prepared}"))
        await db.execute(text("SET LOCAL plan_cache_mode = force_generic_plan"))
        run = f"EXECUTE for_call('{sid}', '{TENANT}', '{call}')"
        generic = "\n".join(await db.scalars(text(f"EXPLAIN {run}")))
        await db.execute(text("DEALLOCATE for_call"))
    took = sorted(float(_found(r"Execution Time: ([\d.]+) ms", p)) for p in plans)
    return {
        "plan": _scans(plans[-1]),
        "buffers": _found(r"Buffers: shared hit=(\d+)", plans[-1]),
        "server_ms": f"{took[len(took) // 2]:.3f}",
        "generic": _scans(generic),
    }


def _found(pattern: str, plan: str) -> str:
    match = re.search(pattern, plan)
    return match.group(1) if match else "?"


def _scans(plan: str) -> str:
    scans = re.findall(r"(Index Scan using \w+|Bitmap Index Scan on \w+|Seq Scan)", plan)
    return ", ".join(scans) + (" + Sort" if "Sort" in plan else "")


async def main_async(sizes: list[int], runs: int, stats: str, background: int) -> None:
    async with bench_stack() as (ep, res, _state):
        for _ in range(background):
            await add_session(res, BACKGROUND_ITEMS)
        if stats == "short":
            await analyze(ep.database_migration_url)
        grown = {n: await add_session(res, n) for n in sizes}
        if stats == "fresh":
            await analyze(ep.database_migration_url)
        print(f"{background} short sessions; statistics {STATS[stats]}")
        print(f"{'statement':18s} {'items':>7s} {'buffers':>7s} {'server ms':>9s}  plan")
        for name, (stmt, no_sort) in STATEMENTS.items():
            for n, sid in grown.items():
                call = f"call_{n // EVERY // 2}_0"  # one in the middle of the session
                got = await measure(res, stmt, sid, call, runs, no_sort=no_sort)
                print(
                    f"{name:18s} {n:7d} {got['buffers']:>7s} {got['server_ms']:>9s}"
                    f"  {got['plan']}  [generic: {got['generic']}]"
                )


def main() -> int:
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000,100000", help="session lengths")
    parser.add_argument("--runs", type=int, default=21, help="timed reads per size (21)")
    parser.add_argument("--stats", choices=list(STATS), default="short", help="(short)")
    parser.add_argument("--background", type=int, default=2000, help="short sessions (2000)")
    args = parser.parse_args()
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        parser.error("--sizes must be comma-separated whole numbers")
    if args.runs < 1 or args.background < 0 or any(n < 2 * EVERY for n in sizes):
        parser.error(
            f"--runs must be at least 1, --background at least 0, every size at least {2 * EVERY}"
        )
    asyncio.run(main_async(sizes, args.runs, args.stats, args.background))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
