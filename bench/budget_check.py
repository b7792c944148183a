"""The per-admission cost of the gate (activities/policies/admission.py): a task's budget,
its tenant's quotas and kill switch, and the admission's record.

Before each model call (and each tool call and sub-agent), the gate takes the budget's lock,
looks up the admission's key, reads in one statement what the budget has committed (its
session_spend row) and reserved (its open admissions), its tenant's quotas and frozen flag
(tenant_controls) and the tenant's spend today and this month (tenant_spend, one row a UTC
day), compares them with the task's budget and the quotas, and records the admission with its
reservation, in one transaction (admit). `check` runs it for a tenant with no quotas set;
`check+quota` for one
with day and month quotas and a full month (31 day rows) of spend, checked on the month's
last day. Measured here on a throwaway PostgreSQL: a
session of `steps` committed steps (each a reply with one tool call and its result, and the
reply's usage row), among `other` sessions of the tenant of the same size, the check run
`--checks` times, each a transaction of its own as call_model runs it; and what counting costs
the reply's transaction (the usage row, the session's and the tenant's day's sums,
UsageRepository.record).
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
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

from throwaway_stack import bench_resources

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from durable_agents.activities.policies.admission import Admission, GateLimits, admit
from durable_agents.storage.admissions import MODEL, Reservation
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.items import NewItem
from durable_agents.storage.quotas import Quotas
from durable_agents.storage.usage import UsageRecord
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.resources import Resources
from durable_agents.workflows.contracts import TaskBudget

TENANT = "bench"
QUOTA_TENANT = "bench-quota"
BUDGET = TaskBudget(tokens=10**11, cost_usd=10**5, tool_calls=10**6, seconds=10**7)
# Never reached: the check reads and compares every figure.
QUOTAS = {
    "tokens_per_day": 10**12,
    "cost_usd_per_day": 10**8,
    "tokens_per_month": 10**12,
    "cost_usd_per_month": 10**8,
    "running_tasks": 10**6,
}
MONTH_END = datetime(2026, 1, 31, 12, tzinfo=UTC)


async def _full_month(res: Resources, tenant: str) -> None:
    """The tenant's quotas set and a reply on each of January's 31 days."""
    async with agent_state(res.sessions, tenant, write=True) as st:
        await st.controls.set_quotas(QUOTAS, "bench")
        sid = uuid.uuid4()
        for day in range(1, 32):
            record = UsageRecord(f"{sid}:{day}", sid, "default", "o", "m", 10, 1, 0, Decimal(0))
            await st.usage.record(record, day=date(2026, 1, day))


async def _session(res: Resources, steps: int, tenant: str = TENANT) -> uuid.UUID:
    sid = uuid.uuid4()
    async with agent_state(res.sessions, tenant, write=True) as st:
        await st.sessions.create(sid, title="bench", model_config={})
        for step in range(steps):
            key = f"{sid}:{step}:model"
            await st.items.append_many(
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
            await st.usage.record(
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


async def _measure(
    res: Resources, sid: uuid.UUID, checks: int, tenant: str = TENANT
) -> list[float]:
    quotas = Quotas(**QUOTAS) if tenant == QUOTA_TENANT else None
    now = MONTH_END if quotas else None
    times = []
    async with agent_state(res.sessions, tenant) as st:
        session = await st.sessions.get(sid)
    for _ in range(checks):
        request = Admission(
            MODEL, f"{sid}:{uuid.uuid4()}", session, BUDGET, reservation=Reservation(32_000, None)
        )
        start = time.perf_counter()
        async with agent_state(res.sessions, tenant, write=True) as st:
            gate = await admit(st, request, GateLimits(quotas), now=now)
        times.append((time.perf_counter() - start) * 1000)
        async with agent_state(res.sessions, tenant, autocommit=True) as st:
            await st.admissions.settle(request.key)  # the reply's transaction does it
        assert gate.admitted
    return times


async def _measure_record(res: Resources, sid: uuid.UUID, count: int) -> list[float]:
    times = []
    for n in range(count):
        async with agent_state(res.sessions, TENANT, write=True) as st:
            start = time.perf_counter()
            record = UsageRecord(f"{sid}:w{n}", sid, "default", "openai", "m", 900, 30, 0, None)
            assert await st.usage.record(record)
            times.append((time.perf_counter() - start) * 1000)
    return times


def _row(what: str, n: int, sessions: int, times: list[float]) -> str:
    times = sorted(times)
    p95 = times[int(len(times) * 0.95) - 1]
    median = statistics.median(times)
    return f"| {what} | {n} | {sessions} | {median:.3f} | {p95:.3f} | {times[-1]:.3f} |"


async def main(steps: list[int], checks: int, other: int) -> None:
    async with bench_resources() as res:
        await _full_month(res, QUOTA_TENANT)
        print("| what | committed steps | sessions in the tenant | p50 ms | p95 ms | max ms |")
        print("|---|---|---|---|---|---|")
        for n in steps:
            for _ in range(other):
                await _session(res, n)
            sid = await _session(res, n)
            await _measure(res, sid, 20)  # warm: connection, statement cache
            print(_row("check", n, other + 1, await _measure(res, sid, checks)))
            quota_sid = await _session(res, n, QUOTA_TENANT)
            await _measure(res, quota_sid, 20, QUOTA_TENANT)
            quota_times = await _measure(res, quota_sid, checks, QUOTA_TENANT)
            print(_row("check+quota", n, other + 1, quota_times))
            print(_row("record", n, other + 1, await _measure_record(res, sid, checks)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[10, 200, 1000])
    parser.add_argument("--checks", type=int, default=500)
    parser.add_argument("--other", type=int, default=3, help="other sessions per size")
    args = parser.parse_args()
    asyncio.run(main(args.steps, args.checks, args.other))
