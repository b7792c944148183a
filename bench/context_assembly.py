"""Context-assembly latency against session length (issue: cost follows the window).

Fills sessions of 100, 1,000 and 10,000 items on a throwaway embedded stack (real
PostgreSQL and S3) and times what call_model does before calling the provider: read the
turn's config, the latest compaction and the window of items, expand refs from S3 within
the budget, count tokens. Prints p50/p95 per size.

    .venv/bin/python bench/context_assembly.py [--runs 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
import warnings

from throwaway_stack import bench_resources  # bench/ is on sys.path when run as a script

from durable_agents.activities.context.assembly import ContextBudget
from durable_agents.activities.context.model_context import assemble_for_step, config_of
from durable_agents.activities.tools.builtin import default_registry
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.items import NewItem
from durable_agents.workers.resources import Resources

SIZES = (100, 1_000, 10_000)
TENANT = "bench"
BUDGET = ContextBudget(context_tokens=32_000, reply_tokens=2_048, tool_result_tokens=6_000)


async def fill(res: Resources, n_items: int) -> uuid.UUID:
    """A session of `n_items`: repeating steps of assistant → tool_call → tool_result
    (every result backed by an S3 artifact of ~8 KB), with a user message every 20 items."""
    sid = uuid.uuid4()
    async with agent_state(res.sessions, TENANT, write=True) as st:
        await st.sessions.create(sid, title="bench", model_config={})
    refs = []
    for k in range(8):
        ref = await res.store.put(TENANT, (f"result body {k} " * 600).encode(), "text/plain")
        refs.append(ref)
    written = 0
    while written < n_items:
        async with agent_state(res.sessions, TENANT, write=True) as st:
            items, artifacts = st.items, st.artifacts
            ids = [await artifacts.register(r, uri=res.store.uri(r)) for r in refs]
            for _ in range(min(500, n_items - written)):
                n = written
                key = f"{sid}:{n}"
                if n % 20 == 0:
                    item = NewItem(sid, "user_message", "user", key, text=f"request {n} " * 20)
                elif n % 3 == 1:
                    item = NewItem(
                        sid,
                        "assistant_message",
                        "assistant",
                        key,
                        text="calling",
                        data={"tool_calls": [{"id": f"c{n}", "name": "read_file"}]},
                    )
                elif n % 3 == 2:
                    item = NewItem(
                        sid,
                        "tool_call",
                        "assistant",
                        key,
                        tool_call_id=f"c{n - 1}",
                        tool_name="read_file",
                        data={"arguments": {"path": "x"}},
                    )
                else:
                    ref = refs[n % len(refs)]
                    item = NewItem(
                        sid,
                        "tool_result",
                        "tool",
                        key,
                        text="result body preview " * 20,
                        tool_call_id=f"c{n - 2}",
                        tool_name="read_file",
                        artifact_id=ids[n % len(refs)],
                        data={"artifact": {"sha256": ref.sha256, "size_bytes": ref.size_bytes}},
                    )
                await items.append(item)
                written += 1
    return sid


async def measure(res: Resources, sid: uuid.UUID, runs: int) -> tuple[float, float, int]:
    config = config_of(
        "bench", "bench-model", "You are a bench.", default_registry().specs(), BUDGET
    )
    timings = []
    tokens = 0
    for _ in range(runs):
        began = time.perf_counter()
        async with agent_state(res.sessions, TENANT) as st:
            context, _ = await assemble_for_step(st, res.store, sid, config)
        timings.append((time.perf_counter() - began) * 1000)
        tokens = context.input_tokens
    timings.sort()
    p95 = timings[min(len(timings) - 1, int(len(timings) * 0.95))]
    return statistics.median(timings), p95, tokens


async def main(runs: int) -> None:
    async with bench_resources() as res:
        print(f"{'items':>7} {'p50 ms':>8} {'p95 ms':>8} {'input tokens':>13}")
        results = {}
        for size in SIZES:
            sid = await fill(res, size)
            await measure(res, sid, 3)  # warm caches and connections
            p50, p95, tokens = await measure(res, sid, runs)
            results[size] = p50
            print(f"{size:>7} {p50:>8.1f} {p95:>8.1f} {tokens:>13}")
        ratio = results[SIZES[-1]] / results[SIZES[0]]
        print(f"p50 ratio {SIZES[-1]:,} / {SIZES[0]:,} items: {ratio:.2f}x (target <= 2x)")


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    asyncio.run(main(parser.parse_args().runs))
