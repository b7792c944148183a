"""Devices at scale: N simulated devices long-polling two real `agentctl gateway` processes.

A throwaway embedded stack; this process runs the cloud side (a Temporal worker with the
real offer_device_call activity, one tiny workflow per call awaiting it) and the devices
(asyncio tasks speaking HTTP with a device key each, alternating gateways: a device polls
one gateway and completes through the other, then posts the same completion again to the
first). Nothing in the gateways is per device but the open poll: calls are leased from
PostgreSQL and woken by NOTIFY (workers/gateway/device_wakes.py).

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

import httpx
from proc_stats import proc_mem_kib
from sqlalchemy import func, select
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from throwaway_stack import bench_stack

from activities.device_relay import DeviceDispatchActivities
from storage.api_keys import ApiKeyRepository
from storage.devices import DeviceRepository
from storage.item_kinds import ItemKind
from storage.items import ItemRepository, NewItem
from storage.models import ItemRow
from storage.sessions import SessionRepository
from workers.resources import Resources
from workflows.contracts import ToolOutcome, ToolRunInput

AGENTCTL = Path(sys.executable).parent / "agentctl"
TENANT = "bench-devices"
QUEUE = "bench-device-dispatch"
BODY = b"what the device read"
POLL_WAIT = 20.0


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
    async with res.sessions() as db, db.begin():
        for n in range(devices):
            device_id, sid = f"dev-{n:05d}", uuid.uuid4()
            key = (await ApiKeyRepository(db).create_device_key(TENANT, device_id)).key
            await DeviceRepository(db, TENANT).register(device_id, ["read_file"])
            await SessionRepository(db, TENANT).create(sid, title="bench", model_config={})
            await ItemRepository(db, TENANT).append(
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


class Tally:
    def __init__(self) -> None:
        self.committed = 0
        self.already = 0
        self.refused: list[str] = []
        self.polls = 0


async def _device(
    http: httpx.AsyncClient,
    urls: list[str],
    n: int,
    key: str,
    tally: Tally,
    stop: asyncio.Event,
) -> None:
    auth = {"Authorization": f"Bearer {key}"}
    sha = hashlib.sha256(BODY).hexdigest()
    claim = {"size_bytes": len(BODY), "sha256": sha, "content_type": "text/plain"}
    turn = n % 2
    while not stop.is_set():  # until its one call came
        turn = 1 - turn
        polled, other = urls[turn], urls[1 - turn]
        try:
            got = await http.post(
                f"{polled}/v1/device/calls/next", params={"wait": POLL_WAIT}, headers=auth
            )
        except httpx.TransportError:
            await asyncio.sleep(1)
            continue
        tally.polls += 1
        if got.status_code == 204:
            continue
        if got.status_code != 200:
            tally.refused.append(f"poll {got.status_code}")
            await asyncio.sleep(1)
            continue
        call = got.json()
        put = await http.put(call["upload"]["url"], content=BODY)
        if put.status_code != 200:
            tally.refused.append(f"put {put.status_code}")
            continue
        body = {"result": claim, "lease": call["lease"]}
        path = f"/v1/device/calls/{call['call_id']}/complete"
        for url in (other, polled):  # the second is a retry: it must commit nothing
            done = await http.post(f"{url}{path}", json=body, headers=auth)
            status = done.json().get("status") if done.status_code == 200 else done.status_code
            if status == "committed":
                tally.committed += 1
            elif status == "already_committed":
                tally.already += 1
            else:
                tally.refused.append(f"complete {status}")
        return  # one call per device


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

        limits = httpx.Limits(max_connections=4 * args.devices, max_keepalive_connections=None)
        http = await stack.enter_async_context(
            httpx.AsyncClient(timeout=httpx.Timeout(60), limits=limits)
        )
        tally, stop = Tally(), asyncio.Event()
        tasks = []
        for n, (_, key, _) in enumerate(setup):
            tasks.append(asyncio.create_task(_device(http, urls, n, key, tally, stop)))
            if n % 50 == 49:
                await asyncio.sleep(0.25)  # connect over a few seconds, as devices would
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

        results = await asyncio.gather(*(one(d, s) for d, _, s in setup))
        took = time.monotonic() - t0
        busy_cpu = sum(_cpu_seconds(p) for p in pids) - cpu0
        peak_kib = sum(proc_mem_kib(p)[1] for p in pids)
        # Each device ends once its second completion was answered.
        _, late = await asyncio.wait(tasks, timeout=60)
        stop.set()
        for task in late:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

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
        "calls": len(results),
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
        "completions_committed": tally.committed,
        "completions_already_committed": tally.already,
        "refused": tally.refused[:10],
        "refused_count": len(tally.refused),
        "polls": tally.polls,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds after connecting")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds measured idle")
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
