"""Devices at scale: N simulated devices long-polling two real `agentctl gateway` processes.

A throwaway embedded stack; this process runs the cloud side (a Temporal worker with the
real offer_device_call activity, one tiny workflow per call awaiting it); the devices run
in `--device-processes` processes of their own (bench/device_clients.py: a device key
each, alternating gateways: a device polls one gateway and completes through the other,
then posts the same completion again to the first). Nothing in the gateways is per device
but the open poll: calls are leased from PostgreSQL and woken by NOTIFY
(workers/device_dispatch/wakes.py).

Reported: the gateways' RSS before any device and with every device polling (per device),
their CPU per device while all poll idle, and for one call per device started at once: the
time until every workflow had its result, the latency of each call (start of its workflow
to its result) p50/p99, and whether each result was committed exactly once (one
tool_result per call key, every second completion answered already_committed).

    cd bench && ../.venv/bin/python device_dispatch.py --devices 1000
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import multiprocessing
import os
import signal
import socket
import statistics
import sys
import time
import uuid
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

import device_clients
import httpx
from device_clients import BODY
from proc_stats import proc_mem_kib
from sqlalchemy import func, select
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from throwaway_stack import bench_stack

from durable_agents.activities.device_relay import DeviceDispatchActivities
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.api_keys import ApiKeyRepository
from durable_agents.storage.items import NewItem
from durable_agents.storage.models import ItemRow
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.workers.resources import Resources
from durable_agents.workflows.contracts import ToolOutcome, ToolRunInput

AGENTCTL = Path(sys.executable).parent / "agentctl"
TENANT = "bench-devices"
QUEUE = "bench-device-dispatch"


@workflow.defn(name="BenchDeviceCall")
class BenchDeviceCall:
    """One device call, dispatched as the agent loop dispatches it (tool_calls.py)."""

    @workflow.run
    async def run(self, inp: ToolRunInput) -> ToolOutcome:
        outcome: ToolOutcome = await workflow.execute_activity(
            "offer_device_call",
            inp,
            result_type=ToolOutcome,
            schedule_to_close_timeout=timedelta(minutes=10),
        )
        return outcome


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _gateway(env: dict[str, str], stack: AsyncExitStack) -> tuple[str, int]:
    port = _free_port()
    proc = await asyncio.create_subprocess_exec(
        str(AGENTCTL),
        "gateway",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )

    async def stop() -> None:
        proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(30):
                await proc.wait()
        except TimeoutError:
            proc.kill()

    stack.push_async_callback(stop)
    url = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=url) as http, asyncio.timeout(60):
        while True:
            try:
                if (await http.get("/healthz")).status_code == 200:
                    return url, proc.pid
            except httpx.TransportError:
                await asyncio.sleep(0.1)


async def _setup(res: Resources, devices: int) -> list[tuple[str, str, uuid.UUID]]:
    """(device id, key, session id) per device: a key, a registration, and a session
    holding one tool call for it."""
    out = []
    async with agent_state(res.sessions, TENANT, write=True) as st:
        for n in range(devices):
            device_id, sid = f"dev-{n:05d}", uuid.uuid4()
            key = (await ApiKeyRepository(st.db).create_device_key(TENANT, device_id)).key
            await st.devices.register(device_id, ["read_file"])
            await st.sessions.create(sid, title="bench", model_config={})
            await st.items.append(
                NewItem(
                    sid,
                    ItemKind.TOOL_CALL,
                    "assistant",
                    f"bench:{sid}:call",
                    tool_call_id="call-1",
                    tool_name="read_file",
                    data={"arguments": {"path": "notes.txt"}},
                )
            )
            out.append((device_id, key, sid))
    return out


async def main(args: argparse.Namespace) -> dict[str, Any]:
    async with bench_stack() as (ep, res, _), AsyncExitStack() as stack:
        env = {
            **os.environ,
            **ep.env(),
            "AGENT_TENANT_ID": "nobody",
            "GATEWAY_RATE_PER_SECOND": "1000",
            "GATEWAY_BURST": "1000",
        }
        gateways = await asyncio.gather(_gateway(env, stack), _gateway(env, stack))
        urls, pids = [u for u, _ in gateways], [p for _, p in gateways]
        setup = await _setup(res, args.devices)
        client = await Client.connect(ep.temporal_address, namespace="default")
        dispatch = DeviceDispatchActivities(res.sessions, store_prefix=res.store.prefix)
        worker = Worker(
            client,
            task_queue=QUEUE,
            workflows=[BenchDeviceCall],
            activities=[dispatch.offer_device_call],
            workflow_runner=UnsandboxedWorkflowRunner(),
            max_concurrent_activities=200,
        )
        await stack.enter_async_context(worker)
        idle_kib = sum(proc_mem_kib(p)[0] for p in pids)

        spawn = multiprocessing.get_context("spawn")
        pipes, procs = [], []
        keyed = [(n, key) for n, (_, key, _) in enumerate(setup)]
        for k in range(args.device_processes):
            mine, theirs = spawn.Pipe()
            proc = spawn.Process(
                target=device_clients.run, args=(urls, keyed[k :: args.device_processes], theirs)
            )
            proc.start()
            pipes.append(mine)
            procs.append(proc)
        for pipe in pipes:
            assert await asyncio.to_thread(pipe.recv) == "ready"
        await asyncio.sleep(args.settle)
        polling_kib = sum(proc_mem_kib(p)[0] for p in pids)
        cpu0, t0 = sum(_cpu_seconds(p) for p in pids), time.monotonic()
        await asyncio.sleep(args.idle)
        idle_cpu = (sum(_cpu_seconds(p) for p in pids) - cpu0) / (time.monotonic() - t0)

        cpu0, t0 = sum(_cpu_seconds(p) for p in pids), time.monotonic()

        async def one(device_id: str, sid: uuid.UUID) -> tuple[float, ToolOutcome]:
            began = time.monotonic()
            outcome: ToolOutcome = await client.execute_workflow(
                BenchDeviceCall.run,
                ToolRunInput(
                    str(sid),
                    TENANT,
                    1,
                    "call-1",
                    "read_file",
                    f"{TENANT}:{sid}:1:call-1",
                    device_id=device_id,
                ),
                id=f"bench-device-{sid}",
                task_queue=QUEUE,
            )
            return time.monotonic() - began, outcome

        settled = await asyncio.gather(*(one(d, s) for d, _, s in setup), return_exceptions=True)
        results = [r for r in settled if not isinstance(r, BaseException)]
        took = time.monotonic() - t0
        busy_cpu = sum(_cpu_seconds(p) for p in pids) - cpu0
        peak_kib = sum(proc_mem_kib(p)[1] for p in pids)
        for pipe in pipes:
            pipe.send("stop")  # every call completed: the devices still polling may go
        tallies = [await asyncio.to_thread(pipe.recv) for pipe in pipes]
        for proc in procs:
            proc.join(30)

        async with res.sessions() as db:
            per_key = (
                await db.execute(
                    select(ItemRow.idempotency_key, func.count())
                    .where(ItemRow.tenant_id == TENANT, ItemRow.kind == ItemKind.TOOL_RESULT)
                    .group_by(ItemRow.idempotency_key)
                )
            ).all()
    latencies = sorted(t for t, _ in results)
    expected_sha = hashlib.sha256(BODY).hexdigest()
    return {
        "devices": args.devices,
        "gateways": 2,
        "rss_mib_no_devices": round(idle_kib / 1024, 1),
        "rss_mib_all_polling": round(polling_kib / 1024, 1),
        "rss_kib_per_device": round((polling_kib - idle_kib) / args.devices, 1),
        "peak_rss_mib": round(peak_kib / 1024, 1),
        "idle_cpu_cores_all_polling": round(idle_cpu, 3),
        "idle_cpu_ms_per_device_per_s": round(idle_cpu * 1000 / args.devices, 3),
        "calls": len(settled),
        "calls_failed": len(settled) - len(results),
        "all_calls_done_s": round(took, 2),
        "calls_per_s": round(len(results) / took, 1),
        "gateway_cpu_ms_per_call": round(busy_cpu * 1000 / len(results), 2),
        "call_latency_p50_s": round(statistics.median(latencies), 3),
        "call_latency_p99_s": round(latencies[int(0.99 * (len(latencies) - 1))], 3),
        "results_right": sum(
            1 for _, o in results if o.ref is not None and o.ref.sha256 == expected_sha
        ),
        "tool_results_committed": sum(int(c) for _, c in per_key),
        "keys_committed_more_than_once": sum(1 for _, c in per_key if int(c) > 1),
        "completions_committed": sum(t["committed"] for t in tallies),
        "completions_already_committed": sum(t["already_committed"] for t in tallies),
        "refused": [r for t in tallies for r in t["refused"]][:10],
        "polls": sum(t["polls"] for t in tallies),
        "transport_errors": sum(t["transport_errors"] for t in tallies),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--device-processes", type=int, default=2)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds after connecting")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds measured idle")
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
