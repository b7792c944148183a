"""Agents written for other SDKs on Temporal, as their users run them, with and without our
claim-check plugin (durable_agents/workers/peers/claim_check_plugin.py), on
bench/compare_loops.py's workload: N model calls, each asking for one tool whose result is R
bytes of distinct seeded text.

The agents are the tests' (tests/support/peer_openai_agent.py, peer_pydantic_agent.py) and a
temporal-agent-harness 0.8 agent (bench/peer_harness_agent.py: pydantic-ai on the harness);
the model a Chat Completions server in this process (tests/support/peer_agents.py); the
worker its own process (bench/peer_bench_worker.py: its RSS is read from /proc every second);
the stack a throwaway embedded one (Temporal dev server, PostgreSQL, SeaweedFS). Per run it
reports calls answered, how the run ended and why (the run's own history and pending tasks),
history bytes (the server's history_size_bytes), stored bytes (our store's tenant prefix plus
the harness's offload directory) over N·R, step p50/p95 (one step = one model request to the
next) and their growth (median of the first ten steps against the last ten), the worker's
peak RSS and the largest payload the SDK's converter made (the model call's input, measured
before any codec).

    .venv/bin/python bench/peer_plugins.py                       # 20kb and 100kb, every SDK
    .venv/bin/python bench/peer_plugins.py --variant 1mb --sdk harness --plugin none
    .venv/bin/python bench/peer_plugins.py --variant smoke --sdk openai-agents --plugin ours

Needs the `peers` extra (openai-agents, temporalio-openai-agents, pydantic-ai-slim) and, for
`--sdk harness`, the `bench` extra's temporal-agent-harness.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from loop_report import percentiles
from peer_report import (
    VARIANTS,
    Row,
    growth,
    probe_largest,
    step_ms,
    step_parts,
    table,
    why_ended,
)
from proc_stats import proc_mem_kib
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from throwaway_stack import bench_stack  # bench/ is on sys.path when run as a script

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from durable_agents import ClaimCheckPlugin
from durable_agents.workers.peers.claim_check import ClaimCheckStore
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.peer_agents import ToolLoopModel, serving

SDKS = ("openai-agents", "pydantic-ai", "harness")
WORKFLOWS = {"openai-agents": "OpenAIAgentWorkflow", "pydantic-ai": "PydanticAgentWorkflow"}
PROMPT = "read them all"
REPO = Path(__file__).resolve().parents[1]
RETRIED = 5  # a task at this attempt fails the same way every time: the run is over


async def stored(res: Resources, tenant: str) -> int:
    total = 0
    paginator = res.store.client.get_paginator("list_objects_v2")
    prefix = f"{res.store.prefix}/{tenant}/"
    async for page in paginator.paginate(Bucket=res.store.bucket, Prefix=prefix):
        total += sum(int(o["Size"]) for o in page.get("Contents", []))
    return total


def append_line(path: Path, line: str) -> None:
    with path.open("a") as out:
        out.write(line + "\n")


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


Finished = Callable[[], Awaitable[bool | None]]  # True: completed; False: failed; None: running


async def start(
    row: Row, client: Client, queue: str, model: ToolLoopModel
) -> tuple[WorkflowHandle[Any, Any], Finished]:
    """Start the agent as its users do; return its handle and how to tell it finished."""
    workflow_id = f"peer-{row.sdk}-{uuid.uuid4().hex[:8]}"
    if row.sdk != "harness":
        handle = await client.start_workflow(
            WORKFLOWS[row.sdk], PROMPT, id=workflow_id, task_queue=queue, result_type=str
        )
        result = asyncio.ensure_future(handle.result())
        # A run the bench stops ends in an error nobody awaits: mark it seen.
        result.add_done_callback(lambda f: f.cancelled() or f.exception())

        async def finished() -> bool | None:
            if not result.done():
                return None
            return not result.cancelled() and result.exception() is None

        return handle, finished

    from peer_harness_agent import WORKFLOW
    from temporal_agent_harness.harness.agent_client import AgentClient
    from temporal_agent_harness.harness.agent_protocol import AgentConfig

    agent = AgentClient(client, workflow_id)
    # A session, not a run: the agent answers the message and waits for the next one.
    await agent.start_and_submit_message(
        "ask",
        {"text": PROMPT},
        workflow_name=WORKFLOW,
        task_queue=queue,
        start_config=AgentConfig(),
    )
    handle = client.get_workflow_handle(workflow_id)
    calls = VARIANTS[row.variant][0]

    async def answered() -> bool | None:
        if (max(model.carried, default=-1) + 1) < calls:
            return None
        try:
            status = await asyncio.wait_for(agent.get_status(), 10)
        except TimeoutError:
            return None
        return True if status.current_turn >= 1 and not status.turn_active else None

    return handle, answered


async def dead(handle: WorkflowHandle[Any, Any]) -> str:
    """How the run ended, if it did: closed, or a task that keeps failing (retried forever)."""
    desc = await handle.describe()
    if desc.status != WorkflowExecutionStatus.RUNNING:
        return str(desc.status.name if desc.status else "?").lower()
    raw = desc.raw_description
    if raw.pending_workflow_task.attempt >= RETRIED:
        return f"workflow task failing (attempt {raw.pending_workflow_task.attempt})"
    for act in raw.pending_activities:
        if act.attempt >= RETRIED:
            return f"{act.activity_type.name} failing (attempt {act.attempt})"
    return ""


async def run_one(
    ep: StackEndpoints, res: Resources, row: Row, args: argparse.Namespace, logs: Path
) -> None:
    calls, size = VARIANTS[row.variant]
    row.n_r = calls * size
    tenant = f"peer-{uuid.uuid4().hex[:8]}"
    queue = f"peer-{uuid.uuid4().hex[:8]}"
    name = f"{row.sdk}-{'ours' if row.ours else 'none'}-{row.variant}-{tenant}"
    offload, probe = logs / f"{name}.offload", logs / f"{name}.probe"
    offload.mkdir()
    model = ToolLoopModel(calls, size)
    plugins: list[Any] = []
    if row.sdk == "harness":
        from peer_harness_agent import client_plugins

        plugins = client_plugins(offload)
    if row.ours:
        plugins.append(ClaimCheckPlugin(tenant, store=ClaimCheckStore(res.store, res.sessions)))
    client = await Client.connect(ep.temporal_address, namespace="default", plugins=plugins)
    raw = await Client.connect(ep.temporal_address, namespace="default")
    row.log = str(logs / f"{name}.log")
    async with serving(model):
        env = {
            **os.environ,
            **ep.env(),
            "PEER_CLAIM_CHECK": "1" if row.ours else "0",
            "PEER_MODEL_TIMEOUT": "120",
            "PEER_OFFLOAD_DIR": str(offload),
            "PEER_PROBE": str(probe),
        }
        command = [sys.executable, str(REPO / "bench" / "peer_bench_worker.py"), row.sdk]
        log = os.open(row.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        worker = await asyncio.create_subprocess_exec(
            *command, queue, tenant, model.url, env=env, cwd=REPO, stdout=log, stderr=log
        )
        os.close(log)  # the child holds its own
        began = time.monotonic()
        try:
            handle, finished = await start(row, client, queue, model)
            outcome: bool | None = None
            described = began
            while outcome is None:
                await asyncio.sleep(1)
                rss = proc_mem_kib(worker.pid)[0] / 1024
                done = len(set(model.carried))
                if not row.rss_by_call or row.rss_by_call[-1][0] != done:
                    row.rss_by_call.append((done, round(rss)))
                outcome = await finished()
                now = time.monotonic()
                last = model.arrivals[-1] if model.arrivals else began
                if outcome is None and now - described > 5:
                    described = now
                    row.ended = await dead(handle)
                    outcome = False if row.ended else None
                if outcome is not None:
                    break
                if now - began > args.limit_seconds:
                    row.ended = f"cut at the {args.limit_seconds:.0f} s limit"
                elif now - last > args.stall_seconds:
                    row.ended = f"stalled (no model call for {args.stall_seconds:.0f} s)"
                elif rss > args.rss_cap_gib * 1024:
                    row.ended = f"cut at the {args.rss_cap_gib:.0f} GiB RSS cap"
                else:
                    continue
                break
            row.rss_mib = proc_mem_kib(worker.pid)[1] / 1024
            row.seconds = time.monotonic() - began
            if outcome:
                row.ended = "completed"
            else:
                if not row.ended:
                    desc = await handle.describe()
                    row.ended = str(desc.status.name if desc.status else "?").lower()
                row.why = await why_ended(raw, handle.id)
            desc = await handle.describe()
            row.history_bytes = desc.raw_description.workflow_execution_info.history_size_bytes
            row.parts_first, row.parts_last = await step_parts(raw, handle.id)
            if desc.status == WorkflowExecutionStatus.RUNNING:
                await handle.terminate("bench: stopped")
        finally:
            worker.kill()
            await worker.wait()
    row.requests, row.calls = model.requests, len(set(model.carried))
    row.offload_bytes = dir_bytes(offload)
    row.stored_bytes = await stored(res, tenant) + row.offload_bytes
    row.p50_ms, row.p95_ms = percentiles(model.arrivals)
    row.first10_ms, row.last10_ms = growth(step_ms(model.arrivals))
    row.model_input_mb = probe_largest(probe) / 1e6
    row.request_mb = max(model.request_bytes, default=0) / 1e6


async def main(args: argparse.Namespace) -> None:
    rows: list[Row] = []
    logs = Path(tempfile.mkdtemp(prefix="peer-bench-", dir=args.logs))
    print(f"worker logs, probes and offload directories in {logs}", flush=True)
    plugins = {"both": (True, False), "ours": (True,), "none": (False,)}[args.plugin]
    async with bench_stack() as (ep, res, _state):
        for variant in args.variant or ["20kb", "100kb"]:
            for sdk in args.sdk.split(","):
                for ours in plugins:
                    row = Row(sdk, ours, variant)
                    await run_one(ep, res, row, args, logs)
                    rows.append(row)
                    print(table([row]).splitlines()[-1], flush=True)
                    if row.why:
                        print(f"    why: {row.why}", flush=True)
                    append_line(Path(args.out or logs / "rows.jsonl"), json.dumps(row.json()))
    print(table(rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS))
    parser.add_argument("--sdk", default=",".join(SDKS), help=f"comma-separated: {SDKS}")
    parser.add_argument("--plugin", choices=["both", "ours", "none"], default="both")
    parser.add_argument("--stall-seconds", type=float, default=120)
    parser.add_argument("--limit-seconds", type=float, default=1800)
    parser.add_argument("--rss-cap-gib", type=float, default=12)
    parser.add_argument("--logs", default=None, help="where the run's directory goes (/tmp)")
    parser.add_argument(
        "--out",
        default=None,
        help="rows appended as JSON (default: the run directory's rows.jsonl)",
    )
    asyncio.run(main(parser.parse_args()))
