"""SSE fan-out: N clients on one gateway process following M live sessions.

A real `agentctl gateway` process on a throwaway embedded stack; the SSE clients run in
`--client-processes` processes of their own (bench/sse_clients.py, reconnecting with
Last-Event-ID if a stream closes before `end`); this process commits items to the sessions
at a steady rate (through ItemRepository, as activities do), recording each commit's time
(the database's clock just before COMMIT: the delay includes the commit itself). The
gateway reads each session once per notification and fans the items out to its
followers (workers/gateway/fanout.py). Reported: the gateway's memory per client and CPU
while the items flow, the delay from commit to each client (p50/p95/p99), and whether any
client lost, repeated or reordered an event (each must see ordinals 1..K exactly once, in
order). Target: 500 clients at 90 commits/s, p99 <= 250 ms.

    cd bench && ../.venv/bin/python sse_fanout.py --clients 500 --sessions 50 --items 40 --rate 90
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
import uuid
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import sse_clients
from proc_stats import proc_mem_kib, system_busy_seconds
from sqlalchemy import text
from throwaway_stack import bench_stack

from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.api_keys import ApiKeyRepository
from durable_agents.storage.items import NewItem
from durable_agents.vocabulary.item_kinds import ItemKind
from durable_agents.vocabulary.session_status import SessionStatus
from durable_agents.workers.resources import Resources

AGENTCTL = Path(sys.executable).parent / "agentctl"
TENANT = "bench"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _pct(ordered: list[float], q: float) -> float:
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 1)


async def _wait_up(url: str) -> None:
    async with httpx.AsyncClient(timeout=2) as http, asyncio.timeout(60):
        while True:
            try:
                if (await http.get(f"{url}/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)


async def _write(
    res: Resources, sids: list[str], items: int, rate: float, commits: dict[tuple[str, int], float]
) -> None:
    """`items` per session, round-robin over the sessions, `rate` commits per second: commit
    k of the run is due at k / rate (a late commit does not push the later ones back), one
    writer per session so a slow commit delays only its own session, as activities are."""
    gap = 1.0 / rate
    start = time.monotonic() + 0.1

    async def session(j: int, sid: str) -> None:
        for n in range(items):
            due = start + (n * len(sids) + j) * gap
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            async with agent_state(res.sessions, TENANT, write=True) as st:
                row, _ = await st.items.append(
                    NewItem(
                        session_id=uuid.UUID(sid),
                        kind=ItemKind.USER_MESSAGE,
                        role="user",
                        idempotency_key=f"bench:{sid}:{n}",
                        text=f"message {n}",
                    )
                )
                # The database's clock just before COMMIT, not this process's after it: on a
                # busy machine this loop may resume late, and the delay would shrink by that.
                at = await st.db.scalar(text("SELECT extract(epoch FROM clock_timestamp())"))
            commits[(sid, row.ordinal)] = float(at)

    await asyncio.gather(*(session(j, sid) for j, sid in enumerate(sids)))


async def main(args: argparse.Namespace) -> dict[str, Any]:
    async with bench_stack() as (ep, res, _):
        sids = [str(uuid.uuid4()) for _ in range(args.sessions)]
        async with agent_state(res.sessions, TENANT, write=True) as st:
            for sid in sids:
                await st.sessions.create(uuid.UUID(sid), title="bench", model_config={})
                await st.sessions.set_status(uuid.UUID(sid), SessionStatus.RUNNING)
            key = (await ApiKeyRepository(st.db).create(TENANT, "bench", ["read"])).key
        env = {
            **os.environ,
            **ep.env(),
            "GATEWAY_RATE_PER_SECOND": "100000",
            "GATEWAY_BURST": "100000",
            # One bench key holds every client's stream.
            "GATEWAY_MAX_STREAMS_PER_KEY": str(args.clients),
        }
        gateway = subprocess.Popen(  # noqa: ASYNC220 (started once, before any timing)
            [str(AGENTCTL), "gateway", "--port", str(args.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{args.port}"
        try:
            await _wait_up(url)
            base_kib = proc_mem_kib(gateway.pid)[0]
            followed = [sids[i % len(sids)] for i in range(args.clients)]
            spawn = multiprocessing.get_context("spawn")
            pipes, procs = [], []
            for k in range(args.client_processes):
                mine, theirs = spawn.Pipe()
                proc = spawn.Process(
                    target=sse_clients.run,
                    args=(args.port, key, followed[k :: args.client_processes], theirs),
                )
                proc.start()
                pipes.append(mine)
                procs.append(proc)
            try:
                for pipe in pipes:  # every stream connected and at the tail
                    assert await asyncio.to_thread(pipe.recv) == "ready"
                connected_kib = proc_mem_kib(gateway.pid)[0]
                commits: dict[tuple[str, int], float] = {}
                cpu_before, busy_before = _cpu_seconds(gateway.pid), system_busy_seconds()
                started = time.monotonic()
                await _write(res, sids, args.items, args.rate, commits)
                wrote = time.monotonic() - started
                async with agent_state(res.sessions, TENANT, write=True) as st:
                    for sid in sids:
                        await st.sessions.set_status(uuid.UUID(sid), SessionStatus.COMPLETED)
                results = [await asyncio.to_thread(pipe.recv) for pipe in pipes]
                flowed = time.monotonic() - started
                cpu = _cpu_seconds(gateway.pid) - cpu_before
                busy = system_busy_seconds() - busy_before
                peak_kib = proc_mem_kib(gateway.pid)[1]
            finally:
                for proc in procs:
                    proc.join(10)
                    if proc.is_alive():
                        proc.kill()
            seen: list[sse_clients.Seen] = [[] for _ in range(args.clients)]
            for k, (theirs_seen, _, _) in enumerate(results):
                seen[k :: args.client_processes] = theirs_seen
            failed = sum(errors for _, errors, _ in results)
            reconnects = sum(again for _, _, again in results)
        finally:
            gateway.terminate()
            gateway.wait(10)
    delays, lost, repeated, reordered = [], 0, 0, 0
    for i, events in enumerate(seen):
        ordinals = [o for o, _ in events]
        expected = list(range(1, args.items + 1))
        repeated += len(ordinals) - len(set(ordinals))
        lost += len(set(expected) - set(ordinals))
        reordered += sum(1 for a, b in pairwise(ordinals) if b <= a)
        for ordinal, at in events:
            delays.append((at - commits[(followed[i], ordinal)]) * 1000)
    delays.sort()
    return {
        "clients": args.clients,
        "sessions": args.sessions,
        "events_expected": args.clients * args.items,
        "events_received": sum(len(e) for e in seen),
        "streams_failed": failed,
        "reconnects_with_last_event_id": reconnects,
        "lost": lost,
        "repeated": repeated,
        "out_of_order": reordered,
        "commit_rate_per_s": round(args.sessions * args.items / wrote, 1),
        "delay_ms_p50": round(statistics.median(delays), 1),
        "delay_ms_p95": _pct(delays, 0.95),
        "delay_ms_p99": _pct(delays, 0.99),
        "delay_ms_max": round(delays[-1], 1),
        "gateway_cpu_s": round(cpu, 1),
        "gateway_cpu_pct_of_a_core": round(100 * cpu / flowed, 1),
        "machine_busy_pct": round(100 * busy / (flowed * (os.cpu_count() or 1)), 1),
        "gateway_rss_mib_idle": round(base_kib / 1024, 1),
        "gateway_rss_mib_connected": round(connected_kib / 1024, 1),
        "gateway_kib_per_client": round((connected_kib - base_kib) / args.clients, 1),
        "gateway_rss_mib_peak": round(peak_kib / 1024, 1),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--items", type=int, default=20, help="items committed per session")
    parser.add_argument("--rate", type=float, default=90.0, help="commits per second, all sessions")
    parser.add_argument("--port", type=int, default=18321)
    parser.add_argument(
        "--client-processes", type=int, default=2, help="processes the clients are spread over"
    )
    for key, value in asyncio.run(main(parser.parse_args())).items():
        print(f"{key}: {value}")
