"""Worker-side CPU per call of the AgentState writes and reads every approval makes.

Each unit runs as the activities run it (its own session from the pool, a transaction where
they use one) against the embedded PostgreSQL, and is timed with this process's CPU clock:
SQLAlchemy's statement building and ORM bookkeeping, asyncpg and the socket calls, not the
server's work. Run it on two commits to see what a change to `storage/` costs or saves.

    .venv/bin/python bench/statement_cpu.py              # 2,000 calls of each
    .venv/bin/python bench/statement_cpu.py --calls 500
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable

from throwaway_stack import bench_resources  # bench/ is on sys.path as a script

from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.items import NewItem
from durable_agents.storage.tool_effects import EffectState
from durable_agents.workers.resources import Resources

TENANT = "bench"
CALL = "call_0_0"


async def cpu_per_call(calls: int, fn: Callable[[int], Awaitable[None]]) -> float:
    """Microseconds of this process's CPU per call of fn, after a warm-up."""
    for i in range(min(200, calls)):
        await fn(-1 - i)
    began = time.process_time()
    for i in range(calls):
        await fn(i)
    return (time.process_time() - began) / calls * 1e6


async def measure(res: Resources, calls: int) -> list[tuple[str, float]]:
    sid = uuid.uuid4()
    async with agent_state(res.sessions, TENANT, write=True) as st:
        await st.sessions.create(sid, title="bench", model_config={})
        # The call run_tool reads back: the model's request and the decision on it.
        await st.items.append_many(
            [
                NewItem(sid, "tool_call", "assistant", f"{sid}:call", tool_call_id=CALL),
                NewItem(sid, "approval", "user", f"{sid}:decision", tool_call_id=CALL),
            ]
        )
    run = uuid.uuid4().hex

    async def set_status(i: int) -> None:  # as set_session_status: one autocommit UPDATE
        async with agent_state(res.sessions, TENANT, autocommit=True) as st:
            await st.sessions.set_status(sid, "running", workflow_run_id="r")

    async def append(i: int) -> None:  # as record_approval: one item in its transaction
        async with agent_state(res.sessions, TENANT, write=True) as st:
            await st.items.append(
                NewItem(sid, "approval", "user", f"{run}:item:{i}", text="approved by bench")
            )

    async def read_call(i: int) -> None:  # as run_tool: the session and the call's items
        async with agent_state(res.sessions, TENANT, autocommit=True) as st:
            await st.sessions.get(sid)
            rows = await st.items.for_tool_call(sid, CALL)
            assert len(rows) == 2

    async def claim_and_settle(i: int) -> None:  # as an effectful tool: claim, then settle
        key = f"{run}:effect:{i}"
        async with agent_state(res.sessions, TENANT, autocommit=True) as st:
            claim = await st.effects.claim_new(
                key, session_id=sid, tool_call_id=CALL, tool_name="write_file"
            )
            assert claim is not None
        async with agent_state(res.sessions, TENANT, write=True) as st:
            await st.effects.settle(key, EffectState.COMPLETED)

    return [
        ("set_status (autocommit UPDATE)", await cpu_per_call(calls, set_status)),
        ("append one item (transaction)", await cpu_per_call(calls, append)),
        ("session + tool call's items (2 reads)", await cpu_per_call(calls, read_call)),
        ("effect claim + settle (2 units)", await cpu_per_call(calls, claim_and_settle)),
    ]


async def main_async(calls: int) -> None:
    async with bench_resources() as res:
        rows = await measure(res, calls)
    print(f"worker-side CPU per call, {calls} calls each:")
    for name, us in rows:
        print(f"  {name:40s} {us:8.0f} us")


def main() -> int:
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="timed calls of each (2000)")
    args = parser.parse_args()
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    asyncio.run(main_async(args.calls))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
