"""The per-step cost of a task's budget check (activities/budget_check.py).

Before each model call of a task with a budget, call_model reads what the session has
committed (its session_spend row: tokens, cost, tool calls, grown with each reply counted;
one round trip) and compares it with the budget. Measured here on a throwaway PostgreSQL: a
session of `steps` committed steps (each a reply with one tool call and its result, and the
reply's usage row), among `other` sessions of the tenant of the same size, the check run
`--checks` times inside an open connection as call_model runs it; and what counting costs
the reply's transaction (the usage row and the session's sums, UsageRepository.record).
Reported: p50 and p95 per check and per record, in ms.

    cd bench && ../.venv/bin/python budget_check.py --steps 10 200 1000 --checks 500
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from decimal import Decimal
from pathlib import Path

from throwaway_stack import bench_resources

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from activities.budget_check import budget_reached
from storage.db import autocommit
from storage.item_kinds import ItemKind
from storage.items import ItemRepository, NewItem
from storage.sessions import SessionRepository
from storage.usage import UsageRecord, UsageRepository
from workers.resources import Resources
from workflows.contracts import TaskBudget

TENANT = "bench"
BUDGET = TaskBudget(tokens=10**11, cost_usd=10**5, tool_calls=10**6, seconds=10**7)


async def _session(res: Resources, steps: int) -> uuid.UUID:
    sid = uuid.uuid4()
    async with res.sessions() as db, db.begin():
        await SessionRepository(db, TENANT).create(sid, title="bench", model_config={})
        items = ItemRepository(db, TENANT)
        usage = UsageRepository(db, TENANT)
        for step in range(steps):
            key = f"{sid}:{step}:model"
            await items.append_many(
                [
                    NewItem(sid, ItemKind.ASSISTANT_MESSAGE, "assistant", key, text=""),
                    NewItem(
                        sid,
                        ItemKind.TOOL_CALL,
                        "assistant",
                        f"{key}:call",
                        text="read_file",
                        tool_call_id=f"call_{step}_0",
                        tool_name="read_file",
                    ),
                    NewItem(
                        sid,
                        ItemKind.TOOL_RESULT,
                        "tool",
                        f"{key}:result",
                        text="ok",
                        tool_call_id=f"call_{step}_0",
                        tool_name="read_file",
                    ),
                ]
            )
            await usage.record(
                UsageRecord(
                    key,
                    sid,
                    "default",
                    "openai",
                    "m",
                    1200,
                    40,
                    800,
                    Decimal("0.001"),
                    tool_calls=1,
                )
            )
    return sid


async def _measure(res: Resources, sid: uuid.UUID, checks: int) -> list[float]:
    times = []
    async with autocommit(res.sessions) as db:
        session = await SessionRepository(db, TENANT).get(sid)
        for _ in range(checks):
            start = time.perf_counter()
            reached = await budget_reached(db, TENANT, session, BUDGET)
            times.append((time.perf_counter() - start) * 1000)
            assert reached is None
    return times


async def _measure_record(res: Resources, sid: uuid.UUID, count: int) -> list[float]:
    times = []
    for n in range(count):
        async with res.sessions() as db, db.begin():
            usage = UsageRepository(db, TENANT)
            start = time.perf_counter()
            record = UsageRecord(f"{sid}:w{n}", sid, "default", "openai", "m", 900, 30, 0, None)
            assert await usage.record(record)
            times.append((time.perf_counter() - start) * 1000)
    return times


def _row(what: str, n: int, sessions: int, times: list[float]) -> str:
    times = sorted(times)
    p95 = times[int(len(times) * 0.95) - 1]
    median = statistics.median(times)
    return f"| {what} | {n} | {sessions} | {median:.3f} | {p95:.3f} | {times[-1]:.3f} |"


async def main(steps: list[int], checks: int, other: int) -> None:
    async with bench_resources() as res:
        print("| what | committed steps | sessions in the tenant | p50 ms | p95 ms | max ms |")
        print("|---|---|---|---|---|---|")
        for n in steps:
            for _ in range(other):
                await _session(res, n)
            sid = await _session(res, n)
            await _measure(res, sid, 20)  # warm: connection, statement cache
            print(_row("check", n, other + 1, await _measure(res, sid, checks)))
            print(_row("record", n, other + 1, await _measure_record(res, sid, checks)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[10, 200, 1000])
    parser.add_argument("--checks", type=int, default=500)
    parser.add_argument("--other", type=int, default=3, help="other sessions per size")
    args = parser.parse_args()
    asyncio.run(main(args.steps, args.checks, args.other))
