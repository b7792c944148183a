"""Agents written for other SDKs on Temporal, as their users run them, with and without our
claim-check plugin (workers/peers/claim_check_plugin.py), on bench/compare_loops.py's workload:
N model calls, each asking for one tool whose result is R bytes of distinct seeded text.

The agents are the tests' (tests/support/peer_openai_agent.py, peer_pydantic_agent.py), the
model a Chat Completions server in this process (tests/support/peer_agents.py), the worker
its own process (tests/support/peer_worker.py: its peak RSS is read from /proc), the stack
a throwaway embedded one (Temporal dev server, PostgreSQL, SeaweedFS). Per run it reports
calls completed (model requests answered), how the run ended, history bytes (the server's
history_size_bytes), stored bytes (the run's tenant prefix) over N·R, step p50/p95 (one step
= one model request to the next) and the worker's peak RSS.

    .venv/bin/python bench/peer_plugins.py                       # 20kb and 100kb, both SDKs
    .venv/bin/python bench/peer_plugins.py --variant smoke --sdk openai-agents --ours-only

Needs the `peers` extra (openai-agents, temporalio-openai-agents, pydantic-ai-slim).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from loop_report import percentiles
from proc_stats import proc_mem_kib
from temporalio.client import Client, WorkflowExecutionStatus
from throwaway_stack import bench_stack  # bench/ is on sys.path when run as a script

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from durable_agents import ClaimCheckPlugin
from durable_agents.workers.peers.claim_check import ClaimCheckStore
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.peer_agents import ToolLoopModel, serving

VARIANTS = {
    "smoke": (10, 5_000),
    "20kb": (100, 20_000),
    "100kb": (200, 100_000),
    "1mb": (100, 1_000_000),
}
WORKFLOWS = {"openai-agents": "OpenAIAgentWorkflow", "pydantic-ai": "PydanticAgentWorkflow"}
REPO = Path(__file__).resolve().parents[1]


@dataclass
class Row:
    sdk: str
    ours: bool
    variant: str
    calls: int = 0
    ended: str = ""
    history_bytes: int = 0
    stored_bytes: int = 0
    n_r: int = 0
    p50_ms: float | None = None
    p95_ms: float | None = None
    rss_mib: float = 0.0
    seconds: float = 0.0


async def stored(res: Resources, tenant: str) -> int:
    total = 0
    paginator = res.store.client.get_paginator("list_objects_v2")
    prefix = f"{res.store.prefix}/{tenant}/"
    async for page in paginator.paginate(Bucket=res.store.bucket, Prefix=prefix):
        total += sum(int(o["Size"]) for o in page.get("Contents", []))
    return total


async def run_one(
    ep: StackEndpoints, res: Resources, row: Row, stall_seconds: float, limit: float
) -> None:
    calls, size = VARIANTS[row.variant]
    row.n_r = calls * size
    tenant = f"peer-{uuid.uuid4().hex[:8]}"
    queue = f"peer-{uuid.uuid4().hex[:8]}"
    model = ToolLoopModel(calls, size)
    plugins = [ClaimCheckPlugin(tenant, store=ClaimCheckStore(res.store, res.sessions))]
    client = await Client.connect(
        ep.temporal_address, namespace="default", plugins=plugins if row.ours else []
    )
    async with serving(model):
        env = {
            **os.environ,
            **ep.env(),
            "PEER_CLAIM_CHECK": "1" if row.ours else "0",
            "PEER_MODEL_TIMEOUT": "120",
        }
        command = [sys.executable, "-m", "tests.support.peer_worker", row.sdk, queue, tenant]
        worker = await asyncio.create_subprocess_exec(
            *command,
            model.url,
            env=env,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        began = time.monotonic()
        try:
            handle = await client.start_workflow(
                WORKFLOWS[row.sdk],
                "read them all",
                id=f"peer-{row.sdk}-{uuid.uuid4().hex[:8]}",
                task_queue=queue,
                result_type=str,
            )
            result = asyncio.ensure_future(handle.result())
            while not result.done():
                await asyncio.wait([result], timeout=1)
                last = model.arrivals[-1] if model.arrivals else began
                if time.monotonic() - last > stall_seconds or time.monotonic() - began > limit:
                    result.cancel()
                    break
            row.rss_mib = proc_mem_kib(worker.pid)[1] / 1024
            if result.done() and not result.cancelled() and result.exception() is None:
                row.ended = "completed"
            else:
                desc = await handle.describe()
                if desc.status == WorkflowExecutionStatus.RUNNING:
                    over = time.monotonic() - began > limit
                    row.ended = (
                        f"cut at the {limit:.0f} s limit"
                        if over
                        else f"stalled (no model call for {stall_seconds:.0f} s)"
                    )
                    await handle.terminate("bench: stopped")
                else:
                    row.ended = str(desc.status.name if desc.status else "?").lower()
            desc = await handle.describe()
            row.history_bytes = desc.raw_description.workflow_execution_info.history_size_bytes
        finally:
            worker.kill()
            await worker.wait()
    row.seconds = time.monotonic() - began
    row.calls = model.requests
    row.stored_bytes = await stored(res, tenant)
    row.p50_ms, row.p95_ms = percentiles(model.arrivals)


def table(rows: list[Row]) -> str:
    head = (
        "| SDK | plugin | N x R | calls | ended | history | stored / N·R | step p50 / p95 |"
        " worker peak RSS | wall |\n|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        calls, size = VARIANTS[r.variant]
        p = f"{r.p50_ms:.0f} / {r.p95_ms:.0f} ms" if r.p50_ms is not None and r.p95_ms else "-"
        lines.append(
            f"| {r.sdk} | {'ours' if r.ours else 'none'} | {calls} x {size // 1000} KB | "
            f"{r.calls} | {r.ended} | {r.history_bytes / 1e6:.2f} MB | "
            f"{r.stored_bytes / r.n_r:.2f} | {p} | {r.rss_mib:.0f} MiB | {r.seconds:.0f} s |"
        )
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> None:
    rows: list[Row] = []
    async with bench_stack() as (ep, res, _state):
        for variant in args.variant or ["20kb", "100kb"]:
            for sdk in args.sdk.split(","):
                for ours in (True,) if args.ours_only else (True, False):
                    row = Row(sdk, ours, variant)
                    await run_one(ep, res, row, args.stall_seconds, args.limit_seconds)
                    rows.append(row)
                    print(table([row]).splitlines()[-1], flush=True)
    print(table(rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS))
    parser.add_argument("--sdk", default="openai-agents,pydantic-ai")
    parser.add_argument("--ours-only", action="store_true")
    parser.add_argument("--stall-seconds", type=float, default=60)
    parser.add_argument("--limit-seconds", type=float, default=900)
    asyncio.run(main(parser.parse_args()))
